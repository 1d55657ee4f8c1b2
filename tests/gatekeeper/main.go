// Command oracle answers, for a set of Gatekeeper mutators and an admitted
// object, what Gatekeeper v3.23.1 does with them. See README.md.
//
// JSON lines on stdin, one JSON answer line per request on stdout, in order.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func main() {
	crdDir := flag.String("crds", "", "directory holding Gatekeeper's mutation CRD YAML files (default: crds/ next to the binary, or $SARTOR_GATEKEEPER_CRDS)")
	flag.Parse()

	// Gatekeeper logs through controller-runtime's logger; keep stdout clean.
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())

	dir, err := crdDirFor(*crdDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		os.Exit(2)
	}
	o, err := NewOracle(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oracle: loading CRDs:", err)
		os.Exit(2)
	}
	if err := o.Serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		os.Exit(1)
	}
}

// Serve is the main loop: one answer line per non-blank input line, flushed
// after each line.
func (o *Oracle) Serve(in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, 1<<20)
	w := bufio.NewWriterSize(out, 1<<16)
	for {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			b := o.AnswerLine(line)
			w.Write(b)
			w.WriteByte('\n')
			if ferr := w.Flush(); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// AnswerLine answers one request line (without the trailing newline).
func (o *Oracle) AnswerLine(line []byte) []byte {
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		return fatal(line, fmt.Sprintf("malformed request: %v", err))
	}
	if len(req.Object) == 0 || string(req.Object) == "null" {
		return fatal(line, "malformed request: no object")
	}
	var panicMsg string
	ans := func() (a *Answer) {
		defer func() {
			if p := recover(); p != nil {
				a = nil
				panicMsg = fmt.Sprintf("panic: %v", p)
			}
		}()
		return o.Answer(&req)
	}()
	if ans == nil {
		return fatal(line, panicMsg)
	}
	b, err := json.Marshal(ans)
	if err != nil {
		return fatal(line, fmt.Sprintf("encoding answer: %v", err))
	}
	return b
}

func fatal(line []byte, msg string) []byte {
	var idOnly struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(line, &idOnly)
	if len(idOnly.ID) == 0 {
		idOnly.ID = json.RawMessage("null")
	}
	b, _ := json.Marshal(FatalAnswer{ID: idOnly.ID, Fatal: msg})
	return b
}
