package testenv

import "testing"

func TestCIValue(t *testing.T) {
	for v, want := range map[string]bool{
		"":           false,
		" ":          false,
		"0":          false,
		"false":      false,
		"False":      false,
		"FALSE":      false,
		"1":          true,
		"true":       true,
		"True":       true,
		"TRUE":       true,
		"yes":        true,
		"woodpecker": true,
	} {
		if got := ciValue(v); got != want {
			t.Errorf("CI=%q: in CI %t, want %t", v, got, want)
		}
	}
}

func TestInCI(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  bool
	}{{"true", true}, {"1", true}, {"false", false}, {"0", false}, {"", false}} {
		t.Setenv("CI", tc.value)
		if got := InCI(); got != tc.want {
			t.Errorf("CI=%q: InCI() = %t, want %t", tc.value, got, tc.want)
		}
	}
}
