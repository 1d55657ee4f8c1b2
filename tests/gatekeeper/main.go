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
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func main() {
	crdDir := flag.String("crds", "", "directory holding Gatekeeper's mutation CRD YAML files (default: crds/ next to the binary, or $SARTOR_GATEKEEPER_CRDS)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile to this file (for tuning)")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "oracle:", err)
			os.Exit(2)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "oracle:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}

	// Many short-lived allocations per request; trade memory for less GC.
	debug.SetGCPercent(400)

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
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "oracle:", err)
		os.Exit(1)
	}
}

// Serve is the main loop: one answer line per non-blank input line, in input
// order, flushed after each line. Requests are answered by GOMAXPROCS workers
// (each builds its own mutation.System); a single writer restores the order.
func (o *Oracle) Serve(in io.Reader, out io.Writer) error {
	workers := runtime.GOMAXPROCS(0)
	type job struct {
		seq  int
		line []byte
	}
	type result struct {
		seq int
		b   []byte
	}
	jobs := make(chan job, 4*workers)
	results := make(chan result, 4*workers)
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				results <- result{j.seq, o.AnswerLine(j.line)}
			}
		}()
	}
	readErr := make(chan error, 1)
	go func() {
		defer close(jobs)
		r := bufio.NewReaderSize(in, 1<<20)
		seq := 0
		for {
			line, err := r.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				jobs <- job{seq, line}
				seq++
			}
			if err == io.EOF {
				readErr <- nil
				return
			}
			if err != nil {
				readErr <- err
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(results)
	}()

	w := bufio.NewWriterSize(out, 1<<16)
	pending := map[int][]byte{}
	next := 0
	var werr error
	for res := range results {
		pending[res.seq] = res.b
		for {
			b, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			if werr != nil {
				continue // keep draining so the workers finish
			}
			w.Write(b)
			w.WriteByte('\n')
			werr = w.Flush()
		}
	}
	if werr != nil {
		return werr
	}
	return <-readErr
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
	if ans.Fatal != "" {
		return fatal(line, ans.Fatal)
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
