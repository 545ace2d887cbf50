// Package coordlogtest is an in-memory coordlog.Log for the coordinators'
// tests: records and markers are kept per partition and replayed in
// order, a hook runs before every write (to inject failures or call back
// into a coordinator), plus a manual clock and helpers to start a
// coordinator and to call back into one from inside an append.
//
// It is imported by tests only. It must not import the broker, storage or
// a coordinator, or touch files.
package coordlogtest
