// Package ncclxml reads and writes NCCL topology XML (the NCCL_TOPO_FILE
// and NCCL_TOPO_DUMP_FILE format) by NCCL's own rules, not those of XML.
//
// NCCL parses these files with a small hand-written reader (NVIDIA/nccl
// src/graph/xml.cc). It knows no prolog, no entities and no text content;
// it takes only spaces, CR and LF before a tag, exactly one space between
// attributes on one line, quoted values, and names and values of fewer
// than MaxStrLen bytes. Parse accepts what that reader accepts, with the
// same errors, and reports the line. Check adds the limits and required
// attributes that NCCL enforces (or silently gets wrong) once the file
// is loaded. Write prints a tree the way NCCL_TOPO_DUMP_FILE does.
//
// AMD's RCCL reads the same syntax with its own version and nesting
// (Dialect RCCL: <system version="2">, <gpu> holding <xgmi>);
// CheckFor and CheckElementFor check against either loader.
package ncclxml
