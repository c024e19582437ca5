package cryptobench

import (
	"fmt"
	"io"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
)

// WriteText writes the report for people: the cipher × block size table in
// MB/s with and without AES-NI (the layout of the cookbook), the projection
// onto OpenVPN, the preferred cipher and how noisy the figures are.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", r.OpenSSL)
	fmt.Fprintf(&b, "CPU: %s, %d cores\n", orUnknown(r.CPU.Model), r.CPU.Cores)
	switch {
	case r.AESNIUsed == nil:
		fmt.Fprintf(&b, "AES-NI used: unknown (%s)\n", r.AESNIEvidence)
	case *r.AESNIUsed:
		fmt.Fprintf(&b, "AES-NI used: yes (%s)\n", r.AESNIEvidence)
	default:
		fmt.Fprintf(&b, "AES-NI used: no (%s)\n", r.AESNIEvidence)
	}

	fmt.Fprintf(&b, "\nEncryption, MB/s (10^6 bytes per second) on one core, openssl speed -evp, %s CPU time per figure", seconds(r.SecondsPerMeasurement))
	if r.Repeat > 1 {
		fmt.Fprintf(&b, ", median of %d", r.Repeat)
	} else {
		fmt.Fprintf(&b, "; the AEAD ciphers at %d bytes median of %d", r.Projection.PacketBytes, PacketRepeat)
	}
	b.WriteString(":\n")
	header := table.Row{"cipher", "AES-NI"}
	for _, s := range r.BlockSizes {
		h := fmt.Sprintf("%d B", s)
		if s == r.Projection.PacketBytes {
			h += " *"
		}
		header = append(header, h)
	}
	t := newTable()
	t.AppendHeader(header)
	var cols []table.ColumnConfig
	for i := range r.BlockSizes {
		cols = append(cols, table.ColumnConfig{Number: 3 + i, Align: text.AlignRight, AlignHeader: text.AlignRight})
	}
	t.SetColumnConfigs(cols)
	rows := append([]CipherResult(nil), r.Ciphers...)
	if r.HMAC != nil {
		rows = append(rows, CipherResult{Cipher: r.HMAC.Algorithm + " (auth)", Available: true, Sizes: []SizeResult{*r.HMAC}})
	}
	for _, cr := range rows {
		if !cr.Available {
			row := table.Row{cr.Cipher, "not measured"}
			for range r.BlockSizes {
				row = append(row, "-")
			}
			t.AppendRow(row)
			t.AppendSeparator()
			continue
		}
		for _, v := range []Variant{WithAESNI, WithoutAESNI} {
			label, name := "as is", cr.Cipher
			if v == WithoutAESNI {
				label, name = "masked", ""
			}
			row := table.Row{name, label}
			for _, s := range r.BlockSizes {
				sr, ok := cr.at(s)
				switch {
				case !ok:
					row = append(row, "")
				case v == WithAESNI:
					row = append(row, mb(sr.WithAESNI.BytesPerSecond))
				default:
					row = append(row, mb(sr.WithoutAESNI.BytesPerSecond))
				}
			}
			t.AppendRow(row)
		}
		t.AppendSeparator()
	}
	b.WriteString(t.Render())
	b.WriteString("\n")
	fmt.Fprintf(&b, "* packet size of the projection. masked: OPENSSL_ia32cap=%s\n", r.AESNIMask)
	for _, cr := range r.Ciphers {
		if cr.Note != "" {
			fmt.Fprintf(&b, "%s: %s\n", cr.Cipher, cr.Note)
		}
	}

	p := r.Projection
	fmt.Fprintf(&b, "\nOpenVPN projection: one core, crypto alone, %d-byte tunnel packets:\n", p.PacketBytes)
	pt := newTable()
	pt.AppendHeader(table.Row{"data channel", "MB/s", "packets/s", "ceiling Mbit/s", "% of a core at 700 Mbit/s", "ceiling Mbit/s without AES-NI"})
	var pcols []table.ColumnConfig
	for i := 2; i <= 6; i++ {
		pcols = append(pcols, table.ColumnConfig{Number: i, Align: text.AlignRight, AlignHeader: text.AlignRight})
	}
	pt.SetColumnConfigs(pcols)
	for _, cp := range p.Ciphers {
		pt.AppendRow(table.Row{
			cp.DataChannel,
			mb(cp.WithAESNI.BytesPerSecondPerCore),
			fmt.Sprintf("%.0f", cp.WithAESNI.PacketsPerSecondPerCore),
			fmt.Sprintf("%.0f", cp.WithAESNI.CeilingMbitPerSec),
			fmt.Sprintf("%.1f", cp.WithAESNI.CorePercentAtPublished),
			fmt.Sprintf("%.0f", cp.WithoutAESNI.CeilingMbitPerSec),
		})
	}
	b.WriteString(pt.Render())
	b.WriteString("\n")
	fmt.Fprintf(&b, "Prefer %s. %s\n", orUnknown(p.PreferredCipher), p.PreferredReason)
	fmt.Fprintf(&b, "%s\n", p.Note)

	n := r.Noise
	if n.Compared == 0 {
		b.WriteString("\nNoise: not estimated; use --repeat 2 or more.")
	} else {
		var how []string
		if strings.Contains(n.Method, "repeats") {
			how = append(how, "(max−min)/median of figures measured several times")
		}
		if strings.Contains(n.Method, "control pairs") {
			how = append(how, "difference between the two runs of figures AES-NI masking cannot change")
		}
		fmt.Fprintf(&b, "\nNoise, %s: median %.1f%%, worst %.1f%% of %d.",
			strings.Join(how, " and "), n.MedianSpreadPercent, n.MaxSpreadPercent, n.Compared)
	}
	b.WriteString(" --seconds 1 --repeat 3 gives steadier figures.\n")
	fmt.Fprintf(&b, "%d figures in %.1f s of wall time (the CPU time per figure is fixed; a busy machine takes longer).\n", n.Samples, r.ElapsedSeconds)
	if n.ClockTimed < n.Samples {
		fmt.Fprintf(&b, "%d of %d runs are timed by openssl itself, in %s steps.\n", n.Samples-n.ClockTimed, n.Samples, seconds(r.TimerResolutionSeconds))
	}
	if n.Unreliable > 0 {
		fmt.Fprintf(&b, "Warning: %d of %d runs stayed unreliable after %d attempts: the kernel used much of openssl's CPU time outside the cipher loop (a busy machine); their figures are the lower, conservative ones.\n",
			n.Unreliable, n.Samples, maxAttempts)
	}
	for _, note := range r.Notes {
		fmt.Fprintf(&b, "Note: %s\n", note)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mb(bps float64) string { return fmt.Sprintf("%.0f", bps/1e6) }

func seconds(s float64) string { return strings.TrimSuffix(fmt.Sprintf("%g", s), ".0") + " s" }

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// newTable returns a table in the style of ovpnperf's other reports.
func newTable() table.Writer {
	t := table.NewWriter()
	style := table.StyleLight
	style.Format.Header = text.FormatDefault // "MB/s", not "MB/S"
	t.SetStyle(style)
	return t
}
