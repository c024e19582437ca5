// Package ui is what ovpnperf shows people on a terminal while and after
// it measures: the progress display and the text table of a run
// document. The documents themselves (internal/measure and the packages
// of the other commands) know nothing of terminals; JSON is the contract,
// this is for reading.
package ui
