package exporter

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuaffinity/gpuaffinity/rdma"
	"github.com/gpuaffinity/gpuaffinity/topology"
)

// rdmaCounter maps one sysfs counter file to a metric. The names are
// node_exporter's infiniband collector's (v1.12.1: 30 counters/ and
// counters_ext/ files, 29 hw_counters/ files) with node_infiniband_
// replaced by gpuaffinity_rdma_; docs/metrics.md lists them.
type rdmaCounter struct {
	dir, file string
	name      string  // after gpuaffinity_rdma_
	scale     float64 // 4 for the data counters, which count 4-byte words
	help      string
	desc      *prometheus.Desc
}

var rdmaCounters = func() []rdmaCounter {
	c := func(dir, file, name, help string) rdmaCounter {
		return rdmaCounter{dir: dir, file: file, name: name, scale: 1, help: help}
	}
	words := func(dir, file, name, help string) rdmaCounter {
		r := c(dir, file, name, help)
		r.scale = 4
		return r
	}
	const (
		ctr = rdma.DirCounters
		ext = rdma.DirCountersExt
		hw  = rdma.DirHwCounters
	)
	list := []rdmaCounter{
		// counters/ (IBTA PortCounters and PortCountersExtended)
		c(ctr, "excessive_buffer_overrun_errors", "excessive_buffer_overrun_errors_total", "Times consecutive flow control update periods each had a buffer overrun."),
		c(ctr, "link_downed", "link_downed_total", "Times the link failed to recover from an error and went down."),
		c(ctr, "link_error_recovery", "link_error_recovery_total", "Times the link recovered from an error."),
		c(ctr, "local_link_integrity_errors", "local_link_integrity_errors_total", "Times local physical errors exceeded their threshold."),
		c(ctr, "multicast_rcv_packets", "multicast_packets_received_total", "Multicast packets received, errors included."),
		c(ctr, "multicast_xmit_packets", "multicast_packets_transmitted_total", "Multicast packets transmitted, errors included."),
		c(ctr, "port_rcv_constraint_errors", "port_constraint_errors_received_total", "Received packets discarded for a switch partition or filter constraint."),
		c(ctr, "port_xmit_constraint_errors", "port_constraint_errors_transmitted_total", "Packets not transmitted for a switch partition or filter constraint."),
		words(ctr, "port_rcv_data", "port_data_received_bytes_total", "Data received on all lanes (sysfs counts 4-byte words)."),
		words(ctr, "port_xmit_data", "port_data_transmitted_bytes_total", "Data transmitted on all lanes (sysfs counts 4-byte words)."),
		c(ctr, "port_rcv_discards", "port_discards_received_total", "Inbound packets discarded because the port was down or congested."),
		c(ctr, "port_xmit_discards", "port_discards_transmitted_total", "Outbound packets discarded because the port was down or congested."),
		c(ctr, "port_rcv_errors", "port_errors_received_total", "Packets with an error received on the port."),
		c(ctr, "port_rcv_packets", "port_packets_received_total", "Packets received on all virtual lanes, errors included."),
		c(ctr, "port_xmit_packets", "port_packets_transmitted_total", "Packets transmitted on all virtual lanes, errors included."),
		c(ctr, "port_xmit_wait", "port_transmit_wait_total", "Ticks during which the port had data to send but sent none."),
		c(ctr, "unicast_rcv_packets", "unicast_packets_received_total", "Unicast packets received, errors included."),
		c(ctr, "unicast_xmit_packets", "unicast_packets_transmitted_total", "Unicast packets transmitted, errors included."),
		c(ctr, "port_rcv_remote_physical_errors", "port_receive_remote_physical_errors_total", "Received packets marked with the End of Bad Packet delimiter."),
		c(ctr, "port_rcv_switch_relay_errors", "port_receive_switch_relay_errors_total", "Received packets a switch could not forward."),
		c(ctr, "symbol_error", "symbol_error_total", "Minor link errors on one or more physical lanes."),
		c(ctr, "VL15_dropped", "vl15_dropped_total", "Incoming VL15 (subnet management) packets dropped for lack of resources."),
		// counters_ext/ (64-bit counters before kernel 4.5)
		c(ext, "port_multicast_rcv_packets", "legacy_multicast_packets_received_total", "Multicast packets received (counters_ext)."),
		c(ext, "port_multicast_xmit_packets", "legacy_multicast_packets_transmitted_total", "Multicast packets transmitted (counters_ext)."),
		words(ext, "port_rcv_data_64", "legacy_data_received_bytes_total", "Data received on all lanes (counters_ext, 4-byte words in sysfs)."),
		c(ext, "port_rcv_packets_64", "legacy_packets_received_total", "Packets received (counters_ext)."),
		c(ext, "port_unicast_rcv_packets", "legacy_unicast_packets_received_total", "Unicast packets received (counters_ext)."),
		c(ext, "port_unicast_xmit_packets", "legacy_unicast_packets_transmitted_total", "Unicast packets transmitted (counters_ext)."),
		words(ext, "port_xmit_data_64", "legacy_data_transmitted_bytes_total", "Data transmitted on all lanes (counters_ext, 4-byte words in sysfs)."),
		c(ext, "port_xmit_packets_64", "legacy_packets_transmitted_total", "Packets transmitted (counters_ext)."),
		// hw_counters/ (driver counters; names as mlx5 has them)
		c(hw, "duplicate_request", "duplicate_requests_packets_total", "Received requests that had been executed before."),
		c(hw, "implied_nak_seq_err", "implied_nak_seq_errors_total", "Times the requester inferred a NAK from a response with a PSN above the expected one."),
		c(hw, "local_ack_timeout_err", "local_ack_timeout_errors_total", "Times a QP's ack timer expired at the sender, below the retry limit."),
		c(hw, "np_cnp_sent", "np_cnp_packets_sent_total", "CNPs sent by the notification point on ECN-marked RoCEv2 traffic."),
		c(hw, "np_ecn_marked_roce_packets", "np_ecn_marked_roce_packets_received_total", "RoCEv2 packets received with ECN congestion marks."),
		c(hw, "out_of_buffer", "out_of_buffer_drops_total", "Drops for lack of a receive WQE."),
		c(hw, "out_of_sequence", "out_of_sequence_packets_received_total", "Out of sequence packets received."),
		c(hw, "packet_seq_err", "packet_sequence_errors_total", "NAK sequence error packets received, below the retry limit."),
		c(hw, "req_cqe_error", "req_cqes_errors_total", "Requester completions with an error."),
		c(hw, "req_cqe_flush_error", "req_cqes_flush_errors_total", "Requester completions flushed with an error."),
		c(hw, "req_remote_access_errors", "req_remote_access_errors_total", "Remote access errors seen by the requester."),
		c(hw, "req_remote_invalid_request", "req_remote_invalid_request_errors_total", "Remote invalid request errors seen by the requester."),
		c(hw, "resp_cqe_error", "resp_cqes_errors_total", "Responder completions with an error."),
		c(hw, "resp_cqe_flush_error", "resp_cqes_flush_errors_total", "Responder completions flushed with an error."),
		c(hw, "resp_local_length_error", "resp_local_length_errors_total", "Local length errors seen by the responder."),
		c(hw, "resp_remote_access_errors", "resp_remote_access_errors_total", "Remote access errors seen by the responder."),
		c(hw, "rnr_nak_retry_err", "rnr_nak_retry_packets_received_total", "RNR NAK packets received, below the retry limit."),
		c(hw, "roce_adp_retrans", "roce_adp_retransmits_total", "Adaptive retransmissions of RoCE traffic."),
		c(hw, "roce_adp_retrans_to", "roce_adp_retransmits_timeout_total", "Timeouts of RoCE adaptive retransmission."),
		c(hw, "roce_slow_restart", "roce_slow_restart_used_total", "Times RoCE slow restart was used."),
		c(hw, "roce_slow_restart_cnps", "roce_slow_restart_cnps_total", "CNPs generated by RoCE slow restart."),
		c(hw, "roce_slow_restart_trans", "roce_slow_restart_total", "Times RoCE slow restart changed state to slow restart."),
		c(hw, "rp_cnp_handled", "rp_cnp_packets_handled_total", "CNPs handled by the reaction point to throttle the sender."),
		c(hw, "rp_cnp_ignored", "rp_cnp_ignored_packets_received_total", "CNPs received and ignored by the reaction point."),
		c(hw, "rx_atomic_requests", "rx_atomic_requests_total", "Atomic requests received."),
		c(hw, "rx_dct_connect", "rx_dct_connect_requests_total", "Connection requests received for DCTs."),
		c(hw, "rx_read_requests", "rx_read_requests_total", "RDMA read requests received."),
		c(hw, "rx_write_requests", "rx_write_requests_total", "RDMA write requests received."),
		c(hw, "rx_icrc_encapsulated", "rx_icrc_encapsulated_errors_total", "RoCE packets received with an ICRC error."),
	}
	for i := range list {
		list[i].desc = newDesc("rdma_"+list[i].name, list[i].help, "device", "port")
	}
	return list
}()

// lifespanFile is hw_counters/lifespan, in milliseconds.
const lifespanFile = "lifespan"

// rdmaCounterFiles lists the files the exporter reads, per directory.
func rdmaCounterFiles() (counters, ext, hw []string) {
	counters, ext, hw = []string{}, []string{}, []string{lifespanFile}
	for _, c := range rdmaCounters {
		switch c.dir {
		case rdma.DirCounters:
			counters = append(counters, c.file)
		case rdma.DirCountersExt:
			ext = append(ext, c.file)
		case rdma.DirHwCounters:
			hw = append(hw, c.file)
		}
	}
	return counters, ext, hw
}

// collectRDMA reads every RDMA port's state and counters. A device or port
// that vanished is left out (its gpuaffinity_rdma_device_present turns 0
// when the last discovery listed it); unreadable or malformed files are
// the collector's error, the other ports are still rendered.
func (e *Exporter) collectRDMA(ctx context.Context, st *State, s *sink) error {
	var ports []rdma.PortSample
	var err error
	if st.ports != nil {
		_, ports, err = st.ports.read(ctx)
	} else {
		ports, err = e.rdma.Read(ctx)
	}
	nics := map[string]*topology.NIC{}
	var known []string
	if st.Node != nil {
		for i := range st.Node.NICs {
			n := &st.Node.NICs[i]
			if n.RDMADevice != "" {
				nics[n.RDMADevice] = n
				known = append(known, n.RDMADevice)
			}
		}
	}
	present := map[string]bool{}
	var order []string
	for i := range ports {
		p := &ports[i]
		if !present[p.Device] {
			present[p.Device] = true
			order = append(order, p.Device)
		}
		rdmaPortMetrics(p, nics[p.Device], s)
	}
	for _, d := range order {
		s.gauge(descRDMAPresent, 1, d)
	}
	for _, d := range known {
		if !present[d] {
			s.gauge(descRDMAPresent, 0, d)
		}
	}
	return err
}

func rdmaPortMetrics(p *rdma.PortSample, nic *topology.NIC, s *sink) {
	port := itoa(p.Port)
	var fabric, role, netdev, bus, fw string
	if nic != nil {
		fabric, role, bus, fw = string(nic.Fabric), string(nic.Role), nic.BusID, nic.FirmwareVersion
		for _, np := range nic.Ports {
			if np.Port == p.Port {
				netdev = np.Netdev
			}
		}
		if netdev == "" && len(nic.Netdevs) > 0 {
			netdev = nic.Netdevs[0]
		}
	}
	s.gauge(descRDMAInfo, 1, p.Device, port, p.LinkLayer, fabric, role, netdev, bus, fw)
	s.gauge(descRDMAState, float64(p.StateID), p.Device, port)
	s.gauge(descRDMAPhysState, float64(p.PhysStateID), p.Device, port)
	s.gauge(descRDMARate, p.RateGbps*125e6, p.Device, port)
	s.gauge(descRDMADisabled, float64(p.Disabled), p.Device, port)
	for i := range rdmaCounters {
		c := &rdmaCounters[i]
		var m map[string]uint64
		switch c.dir {
		case rdma.DirCounters:
			m = p.Counters
		case rdma.DirCountersExt:
			m = p.CountersExt
		default:
			m = p.HwCounters
		}
		if v, ok := m[c.file]; ok {
			s.counter(c.desc, float64(v)*c.scale, p.Device, port)
		}
	}
	if v, ok := p.HwCounters[lifespanFile]; ok {
		s.gauge(descRDMALifespan, float64(v)/1000, p.Device, port)
	}
}
