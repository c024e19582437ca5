package openvpn

// FactsDoc is the file of this project that holds the OpenVPN facts
// ovpnperf's findings, reasons and recipes rest on, each with its public
// source (manual section, OpenVPN source file at a release tag, kernel
// document, publication, or an ovpnperf command that measures it). The
// Debian package installs it under /usr/share/doc/ovpnperf.
const FactsDoc = "docs/openvpn-facts.md"

// Fact cites one heading of FactsDoc by the anchor GitHub gives it:
// Fact("mssfix") is "docs/openvpn-facts.md#mssfix". Text that cannot call
// a function (a constant) writes the same form literally.
// TestFactCitations checks that every citation in the code and the README,
// literal or through Fact, names a heading that exists.
func Fact(anchor string) string { return FactsDoc + "#" + anchor }
