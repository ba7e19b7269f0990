// Command tensorfs mounts an ML checkpoint as a read-only directory with
// one file per tensor, and lists, extracts and loads tensors without
// mounting. Run `tensorfs help` for the commands and `tensorfs CMD -h` for
// each command's flags.
//
// Errors are one line on stderr starting "tensorfs: "; the exit status is
// 0 on success, 1 on an error and 2 on a usage error.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/formats"
	"github.com/lazyweights/tensorfs/fs"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/source"
)

// command is one row of the dispatch table: a subcommand's name, the
// one-line summary `tensorfs help` shows, and the function that parses
// its arguments (without the command name) and runs it. The help row's
// run is nil: help reads the table, so dispatch calls runHelp itself.
type command struct {
	name    string
	summary string
	run     func(args []string) error
}

// commands is the dispatch table, in the order `tensorfs help` lists it.
// Each command lives in its own file (mount.go, umount.go, ...).
var commands = []command{
	{"mount", "mount a checkpoint read-only and serve it in the foreground", runMount},
	{"umount", "unmount a tensorfs mount (also clears a dead one)", runUmount},
	{"ls", "list a checkpoint's tensors without mounting", runLs},
	{"cat", "write one tensor's bytes to stdout without mounting", runCat},
	{"load", "pull every tensor through the Go client with bounded memory", runLoad},
	{"convert", "write a checkpoint as one safetensors file", runConvert},
	{"check", "check that a checkpoint is whole and consistent; one line per problem", runCheck},
	{"bench", "measure reads through a mount beside direct reads of the same bytes", runBench},
	{"demo", "mount a small generated checkpoint and show around it", runDemo},
	{"help", "explain the commands, one command's flags, or a topic (remote)", nil},
	{"version", "print the version", runVersion},
}

func main() {
	os.Exit(run(os.Args[1:]))
}

// run dispatches args and returns the exit status.
func run(args []string) int {
	if len(args) == 0 {
		printHelp(os.Stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		name = "help"
	case "-version", "--version":
		name = "version"
	}
	cmd := findCommand(name)
	switch {
	case cmd == nil:
		return exitStatus(usagef("unknown command %q%s (run `tensorfs help`)", name, suggestion(name)))
	case cmd.run == nil:
		return exitStatus(runHelp(args[1:]))
	}
	return exitStatus(cmd.run(args[1:]))
}

// topic is a subject of `tensorfs help TOPIC` that is no command.
type topic struct {
	name    string
	summary string
	print   func(w io.Writer)
}

// topics are the help topics, in the order `tensorfs help` lists them.
var topics = []topic{
	{"remote", remoteTopicSummary(schemes), printRemoteHelp},
}

// remoteTopicSummary is the remote topic's line in `tensorfs help`.
func remoteTopicSummary(t source.Table) string {
	return "remote SOURCEs (" + t.Names() + ") and the flags of their reads and caches"
}

// findTopic returns the topic called name; a remote scheme's name ("hf",
// "s3", "https", with or without "://") is the remote topic.
func findTopic(name string) *topic {
	for i := range topics {
		if topics[i].name == name {
			return &topics[i]
		}
	}
	for _, s := range schemes {
		if n := strings.ToLower(name); n == s.Prefix || n+"://" == s.Prefix {
			return findTopic("remote")
		}
	}
	return nil
}

// suggestion is " (did you mean NAME?)" for the command or topic whose
// name is nearest name (at most 2 edits, or name a prefix of it), else "".
func suggestion(name string) string {
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	for _, t := range topics {
		names = append(names, t.name)
	}
	best, bestD := "", 3
	for _, n := range names {
		d := editDistance(strings.ToLower(name), n)
		if len(name) >= 2 && strings.HasPrefix(n, strings.ToLower(name)) {
			d = 1
		}
		if d < bestD {
			best, bestD = n, d
		}
	}
	if best == "" {
		return ""
	}
	return " (did you mean " + best + "?)"
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func findCommand(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// errHelp ends a command whose help was asked for: exit status 0.
var errHelp = errors.New("help requested")

// errReported ends a command that has said what went wrong itself (check,
// one line per problem): exit status 1, nothing more printed.
var errReported = errors.New("reported")

// exitStatus prints err as one "tensorfs: " line and returns the status.
func exitStatus(err error) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.Is(err, errReported):
		return 1
	case errors.As(err, &ue):
		fmt.Fprintln(os.Stderr, "tensorfs: "+oneLine(ue.msg))
		return 2
	}
	fmt.Fprintln(os.Stderr, "tensorfs: "+oneLine(describe(err)))
	return 1
}

// describe is err's message, with a failed system call on a path said as
// "PATH: what went wrong" (as for every other error naming a file), and a
// dead FUSE mount (its server killed) said so, with the command that
// clears it.
func describe(err error) string {
	pe, ok := err.(*iofs.PathError)
	if !ok {
		return err.Error()
	}
	return describePath(pe)
}

// describePath is the message of a failed system call on a path; for a
// dead FUSE mount it names the mount point and the command that clears
// it.
func describePath(pe *iofs.PathError) string {
	msg := pe.Path + ": " + pe.Err.Error()
	if errors.Is(pe.Err, syscall.ENOTCONN) || errors.Is(pe.Err, syscall.ECONNABORTED) {
		if mp, ok := mountAbove(pe.Path); ok {
			msg += fmt.Sprintf(" (%s is a dead FUSE mount: its server was killed; clear it with `tensorfs umount %s`)", mp, mp)
		} else {
			msg += " (a dead FUSE mount: its server was killed; clear it with `tensorfs umount` on its mount point)"
		}
	}
	return msg
}

// mountAbove returns the FUSE mount point that path is in (path itself or
// its nearest ancestor that is one), as the user wrote it where possible.
func mountAbove(path string) (string, bool) {
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		if m, ok := fs.FindMount(p); ok && m.FUSE {
			return p, true
		}
		if p == filepath.Dir(p) || p == "." {
			return "", false
		}
	}
}

// unwrapPath returns the system error of a *PathError (its path is in the
// message already), or err.
func unwrapPath(err error) error {
	var pe *iofs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// parseMode parses the value of the backing-mode flag --name of command
// cmd (backing.ParseMode), as a usage error naming the flag.
func parseMode(cmd, name, value string) (backing.Mode, error) {
	mode, err := backing.ParseMode(value)
	if err != nil {
		return 0, usagef("%s: --%s: unknown mode %q (want mmap, pread or direct)", cmd, name, value)
	}
	return mode, nil
}

// oneLine folds a message onto one line, escaping what a terminal would
// not show as text (index.Printable).
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return index.Printable(strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " "))
}

// flags is a command's flag set with its help text.
type flags struct {
	*flag.FlagSet
	name  string
	args  string // "[flags] SOURCE MOUNTPOINT"
	about string // paragraphs after the usage line
}

// newFlags returns the flag set of command name; args is the synopsis
// after the name and about the description `tensorfs name -h` prints.
func newFlags(name, args, about string) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by parse, help by help
	fs.Usage = func() {}
	return &flags{FlagSet: fs, name: name, args: args, about: about}
}

// parse parses args and checks the number of operands is in [min, max]
// (max < 0: no limit). Flags may come before, between or after the
// operands (tensorfs ls FILE --json), as with rclone and restic; "--" ends
// the flags, so an operand that starts with "-" goes after it. -h prints
// the help and returns errHelp.
func (f *flags) parse(args []string, min, max int) error {
	err := f.Parse(f.interleaved(args))
	if errors.Is(err, flag.ErrHelp) {
		helpRequested(f)
		return errHelp
	}
	if err != nil {
		return usagef("%s: %v (usage: %s)", f.name, err, f.synopsis())
	}
	// An empty value (--dtype "") is a mistake, not a request for the
	// default, except where empty means none (bench --mount "").
	var empty string
	f.Visit(func(fl *flag.Flag) {
		if g, ok := fl.Value.(flag.Getter); ok && empty == "" && fl.Name != "mount" {
			if v, ok := g.Get().(string); ok && v == "" {
				empty = fl.Name
			}
		}
	})
	if empty != "" {
		return usagef("%s: --%s: empty value (usage: %s)", f.name, empty, f.synopsis())
	}
	n := f.NArg()
	if n < min || (max >= 0 && n > max) {
		return usagef("%s: wrong number of arguments (usage: %s; see `tensorfs %s -h`)", f.name, f.synopsis(), f.name)
	}
	return nil
}

// interleaved returns args with the flags first, then "--" and the
// operands, each in the order given, so that the standard flag package
// (which stops at the first operand) parses flags given after operands.
// A flag that takes a value as the next argument ("--dtype f32") keeps
// it; "-" alone is an operand; everything after "--" is an operand.
func (f *flags) interleaved(args []string) []string {
	var flagArgs, operands []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			operands = append(operands, args[i+1:]...)
			i = len(args)
		case len(a) > 1 && a[0] == '-':
			flagArgs = append(flagArgs, a)
			name := strings.TrimLeft(a, "-")
			if strings.Contains(name, "=") {
				continue
			}
			if fl := f.Lookup(name); fl != nil && !isBoolFlag(fl) && i+1 < len(args) {
				i++
				flagArgs = append(flagArgs, args[i])
			}
		default:
			operands = append(operands, a)
		}
	}
	return append(append(flagArgs, "--"), operands...)
}

// isBoolFlag reports whether fl takes no value (--json, not --json=true).
func isBoolFlag(fl *flag.Flag) bool {
	b, ok := fl.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// synopsis is the usage line: "tensorfs NAME ARGS".
func (f *flags) synopsis() string { return strings.TrimSpace("tensorfs " + f.name + " " + f.args) }

// isSet reports whether flag name was given on the command line.
func (f *flags) isSet(name string) bool {
	set := false
	f.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

// helpRequested answers -h: it prints f's help on stdout. Tests replace
// it to get every command's flag set without running the command.
var helpRequested = func(f *flags) { f.help(os.Stdout) }

// flagGroups are the headings -h prints flags under, in order: the
// everyday flags first (under "flags:"), then the levers most runs never
// touch. groupOf says which group a flag is in, by name, and
// isRemoteFlag which flags are remote ones; a flag named in neither is
// an everyday one. One table for every command: a flag name
// means the same thing wherever it is defined.
const (
	groupGPU    = "GPU upload (with --gpu):"
	groupTuning = "Tuning (benchmarks and debugging):"
)

// groupRemote names the schemes of the table (remoteGroup).
var groupRemote = remoteGroup(schemes)

// remoteGroup is the heading of the remote flags, naming t's schemes.
func remoteGroup(t source.Table) string {
	return "Remote sources (" + t.Names() + ") and caches:"
}

var flagGroups = []string{
	"flags:",
	groupGPU,
	groupRemote,
	groupTuning,
}

var groupOf = map[string]string{
	"verify":         groupGPU,
	"buffers":        groupGPU,
	"streams":        groupGPU,
	"register":       groupGPU,
	"write-combined": groupGPU,

	"io":                 groupTuning,
	"max-write":          groupTuning,
	"readahead-kb":       groupTuning,
	"max-background":     groupTuning,
	"no-splice":          groupTuning,
	"direct-io":          groupTuning,
	"keep-backing-cache": groupTuning,
	"no-passthrough":     groupTuning,
	"debug":              groupTuning,
	"cpuprofile":         groupTuning,
	"memprofile":         groupTuning,
}

// flagGroup is the heading fl is printed under.
func flagGroup(fl *flag.Flag) string {
	if g, ok := groupOf[fl.Name]; ok {
		return g
	}
	if isRemoteFlag(fl.Name) {
		return groupRemote
	}
	return flagGroups[0]
}

// help writes the command's usage and the first paragraph of its
// description, its everyday flags, the rest of the description, then the
// other flags in their groups (flagGroups), each group in name order.
// The remote group, the same in every command that has it, is not
// repeated: one line points to `tensorfs help remote`, which prints it
// once (remoteTopic).
func (f *flags) help(w io.Writer) {
	var b bytes.Buffer
	about := strings.TrimSpace(f.about)
	first, rest, _ := strings.Cut(about, "\n\n")
	fmt.Fprintf(&b, "usage: %s\n\n%s\n", f.synopsis(), first)
	for i, g := range flagGroups {
		if g == groupRemote {
			if f.hasGroup(g) {
				fmt.Fprintf(&b, "\n%s\n%s", g, wrap(remotePointer, "  ", 78))
			}
			continue
		}
		f.writeGroup(&b, g)
		if i == 0 && strings.TrimSpace(rest) != "" {
			fmt.Fprintf(&b, "\n%s\n", strings.TrimSpace(rest))
		}
	}
	w.Write(b.Bytes())
}

// remotePointer is what a command's help says in place of the remote
// group's flags (remotePointerText).
var remotePointer = remotePointerText(schemes)

// remotePointerText names the SOURCEs of t and remotePointerFlags. It
// opens with the command, which wrapping then never splits.
func remotePointerText(t source.Table) string {
	return "`tensorfs help remote` explains once the flags of a remote SOURCE (`--" + strings.Join(remotePointerFlags, "`, `--") + "` and the rest; in full: docs/REMOTE.md). SOURCE may be " + t.Forms() + "."
}

// remotePointerFlags are the remote flags remotePointer names, each in
// the remote group (TestHelpTables).
var remotePointerFlags = []string{"part-size", "cache-dir", "proxy"}

// hasGroup reports whether f defines a flag of group g.
func (f *flags) hasGroup(g string) bool {
	has := false
	f.VisitAll(func(fl *flag.Flag) { has = has || flagGroup(fl) == g })
	return has
}

// writeGroup writes the flags of group g under its heading; nothing when
// f has none.
func (f *flags) writeGroup(b *bytes.Buffer, g string) {
	n := 0
	f.VisitAll(func(fl *flag.Flag) {
		if flagGroup(fl) != g {
			return
		}
		if n == 0 {
			b.WriteString("\n" + g + "\n")
		}
		n++
		arg, usage := flag.UnquoteUsage(fl)
		fmt.Fprintf(b, "  --%s", fl.Name)
		if arg != "" {
			fmt.Fprintf(b, " %s", arg)
		}
		if showDefault(fl.DefValue) {
			usage += " (default " + fl.DefValue + ")"
		}
		b.WriteByte('\n')
		b.WriteString(wrap(usage, "      ", 78))
	})
}

// showDefault reports whether help shows a flag's default value: not
// when it is the zero value or -1, which mean "not set" (--gpu N: no
// device).
func showDefault(v string) bool {
	return v != "" && v != "false" && v != "0" && v != "-1"
}

// para is text filled into lines of at most 74 bytes, for a help
// paragraph built from parts (formats.List), without the last newline.
func para(text string) string { return strings.TrimSuffix(wrap(text, "", 74), "\n") }

// wrap fills text into lines of at most width bytes, each starting with
// indent and ending with a newline.
func wrap(text, indent string, width int) string {
	var b strings.Builder
	line := indent
	for _, w := range strings.Fields(text) {
		if line != indent && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += w
	}
	b.WriteString(line + "\n")
	return b.String()
}

func runHelp(args []string) error {
	f := newFlags("help", "[COMMAND | TOPIC]", "Lists the commands and help topics, or explains one command and its flags, or one topic (remote: remote SOURCEs and their flags; also under a scheme's name: "+schemeTopics(schemes)+").")
	if err := f.parse(args, 0, 1); err != nil {
		return err
	}
	if f.NArg() == 0 {
		printHelp(os.Stdout)
		return nil
	}
	if t := findTopic(f.Arg(0)); t != nil {
		t.print(os.Stdout)
		return nil
	}
	cmd := findCommand(f.Arg(0))
	switch {
	case cmd == nil:
		return usagef("help: unknown command or topic %q%s (run `tensorfs help`)", f.Arg(0), suggestion(f.Arg(0)))
	case cmd.run == nil:
		f.help(os.Stdout)
		return nil
	}
	return cmd.run([]string{"-h"})
}

func printHelp(w io.Writer) {
	var b bytes.Buffer
	b.WriteString(para("tensorfs mounts an ML checkpoint (" + formats.List() + ") as a read-only directory with one file per tensor, read lazily from the checkpoint and converted on the fly (.f32/ .f16/ .bf16/ .f64/ .npy/ views)."))
	b.WriteString(`

usage: tensorfs COMMAND [flags] [arguments]

commands:
`)
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-8s %s\n", c.name, c.summary)
	}
	b.WriteString("\nhelp topics (tensorfs help TOPIC):\n")
	for _, t := range topics {
		fmt.Fprintf(&b, "  %-8s %s\n", t.name, t.summary)
	}
	prog := invocation()
	fmt.Fprintf(&b, `
Run "%[1]s COMMAND -h" for a command's flags; flags may come before or
after the arguments, and "--" ends them. First steps:
  %[1]s demo                                # see a mount in action
  %[1]s mount model.safetensors /mnt/model  # serve until Ctrl-C or umount
`, prog)
	b.WriteString(`
Errors are one line on stderr starting "tensorfs: "; the exit status is 0
on success, 1 on an error, 2 on a usage error.
`)
	w.Write(b.Bytes())
}

// invocation is how the user ran this binary, for the commands that help
// suggests: "go run ./cmd/tensorfs" when go run built it (in the go
// tool's temporary directory), the path typed when there was one
// ("./tensorfs"), its name otherwise (found on PATH).
func invocation() string {
	if exe, err := os.Executable(); err == nil && strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return "go run ./cmd/tensorfs"
	}
	arg0 := os.Args[0]
	if strings.ContainsAny(arg0, " \t'\"\\$") || arg0 == "" {
		return "tensorfs"
	}
	return arg0
}

// selfCommand is a command line that runs this program again from the
// user's shell, after this process has exited (demo --keep's umount
// line): selfCommandFor(os.Executable()).
func selfCommand() string {
	exe, err := os.Executable()
	if err != nil {
		return invocation()
	}
	return selfCommandFor(exe)
}

// selfCommandFor is selfCommand for the binary at exe: "go run
// ./cmd/tensorfs" where go run built it (go run removes that binary when
// it exits), else exe itself, an absolute path that works from any
// directory whether or not tensorfs is on PATH, quoted for the shell
// where it must be.
func selfCommandFor(exe string) string {
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return "go run ./cmd/tensorfs"
	}
	return shellQuote(exe)
}

// shellQuote returns s as one word for a POSIX shell: as it is when it
// holds only characters no shell treats specially, else in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,:@%=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise the module version or VCS revision recorded by the Go tool.
var version = ""

func versionString() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 && (v == "" || v == "(devel)") {
			v = "devel-" + s.Value[:12]
		}
	}
	if v == "" {
		v = "(devel)"
	}
	return v + " " + bi.GoVersion
}

func runVersion(args []string) error {
	f := newFlags("version", "", "Prints the version of tensorfs and the Go release it was built with.")
	if err := f.parse(args, 0, 0); err != nil {
		return err
	}
	fmt.Println("tensorfs " + versionString())
	return nil
}
