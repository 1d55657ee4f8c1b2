// Package shapes drives Gatekeeper's mutation library (pinned in go.mod) with
// the shapes of sartor's crates/engine/benches/scale.rs and gatekeeper.rs,
// the way Gatekeeper's mutating webhook calls it, and holds a copy of the
// system benchmarks Gatekeeper's performance branch adds
// (system_shapes_test.go), so that they run against the pinned release too.
// It holds benchmarks and their fixtures only; nothing here ships. Run
// through ../../compare.sh.
package shapes
