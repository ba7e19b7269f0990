package pickle

import "strings"

// NormModule maps Python 2 module names to their Python 3 names.
func NormModule(mod string) string {
	switch mod {
	case "__builtin__", "exceptions":
		return "builtins"
	case "copy_reg":
		return "copyreg"
	case "cPickle":
		return "pickle"
	}
	return mod
}

// Modules a data file has no business naming: anything in them (or their
// submodules) refuses the file.
var dangerousModules = map[string]bool{
	"os": true, "posix": true, "nt": true, "posixpath": true, "ntpath": true,
	"subprocess": true, "_posixsubprocess": true, "sys": true, "shutil": true,
	"importlib": true, "imp": true, "pickle": true, "_pickle": true, "cPickle": true,
	"pickletools": true, "copyreg": true, "copy_reg": true, "marshal": true,
	"webbrowser": true, "socket": true, "_socket": true, "pty": true, "runpy": true,
	"code": true, "codeop": true, "ctypes": true, "_ctypes": true, "cffi": true,
	"multiprocessing": true, "signal": true, "pdb": true, "bdb": true, "timeit": true,
	"commands": true, "popen2": true, "platform": true, "types": true,
	"functools": true, "operator": true, "_operator": true, "io": true, "_io": true,
	"tempfile": true, "glob": true, "pathlib": true, "urllib": true, "urllib2": true,
	"http": true, "httplib": true, "ftplib": true, "smtplib": true, "telnetlib": true,
	"asyncio": true, "threading": true, "_thread": true, "thread": true, "gc": true,
	"inspect": true, "site": true, "zipimport": true, "pkgutil": true,
	"distutils": true, "setuptools": true, "pip": true, "dill": true, "cloudpickle": true,
	"joblib": true, "shelve": true, "dbm": true, "sqlite3": true, "requests": true,
	"builtins.__import__": true, "torch.hub": true, "numpy.f2py": true,
	"numpy.distutils": true, "numpy.testing": true, "_winapi": true, "winreg": true,
	"msvcrt": true, "resource": true, "fcntl": true, "mmap": true, "select": true,
	"selectors": true, "ssl": true, "xmlrpc": true, "tarfile": true, "zipfile": true,
	"linecache": true, "trace": true, "traceback": true, "sysconfig": true,
	"venv": true, "ensurepip": true, "idlelib": true, "tkinter": true, "turtle": true,
}

// Dangerous names in otherwise harmless modules.
var dangerousNames = map[string]bool{
	"torch.load": true, "torch.save": true, "torch.jit.load": true,
	"torch.serialization.load": true, "numpy.load": true, "numpy.loadtxt": true,
	"numpy.fromfile": true, "numpy.save": true, "numpy.lib.npyio.load": true,
}

// Plain data classes in otherwise refused modules (paths and namespaces
// in training configs).
var safeInRefusedModules = map[string]bool{
	"types.SimpleNamespace": true, "pathlib.Path": true, "pathlib.PosixPath": true,
	"pathlib.WindowsPath": true, "pathlib.PurePath": true, "pathlib.PurePosixPath": true,
	"pathlib.PureWindowsPath": true,
	// Python 3.13 defines them in pathlib._local (DCP's .metadata names
	// pathlib._local.PosixPath, its StorageMeta.checkpoint_id).
	"pathlib._local.Path": true, "pathlib._local.PosixPath": true,
	"pathlib._local.WindowsPath": true, "pathlib._local.PurePath": true,
	"pathlib._local.PurePosixPath": true, "pathlib._local.PureWindowsPath": true,
}

// The builtins a data file may name; every other builtin is refused.
var safeBuiltins = map[string]bool{
	"set": true, "frozenset": true, "tuple": true, "list": true, "dict": true,
	"object": true, "complex": true, "bytearray": true, "bytes": true, "str": true,
	"unicode": true, "int": true, "long": true, "float": true, "bool": true,
	"slice": true, "range": true, "xrange": true, "NoneType": true, "Ellipsis": true,
	"NotImplemented": true,
}

// CheckGlobal reports whether module.name must refuse the file, and
// why (a suffix for the message, possibly empty).
func CheckGlobal(mod, name string) (bool, string) {
	if mod == "" || name == "" || strings.ContainsAny(mod+name, " \t\r\n\x00") {
		return true, ": malformed name"
	}
	for _, c := range strings.Split(name, ".") {
		if len(c) > 4 && strings.HasPrefix(c, "__") && strings.HasSuffix(c, "__") {
			return true, ": it reaches a dunder attribute"
		}
	}
	nm := NormModule(mod)
	if nm == "builtins" {
		if safeBuiltins[name] {
			return false, ""
		}
		return true, ": a builtin that is not a plain data type"
	}
	if safeInRefusedModules[nm+"."+name] {
		return false, ""
	}
	for m := nm; ; {
		if dangerousModules[m] {
			return true, ""
		}
		i := strings.LastIndexByte(m, '.')
		if i < 0 {
			break
		}
		m = m[:i]
	}
	return dangerousNames[nm+"."+name], ""
}
