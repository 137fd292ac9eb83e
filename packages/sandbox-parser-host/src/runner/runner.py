# The Python side of the parser protocol (docs/parser-protocol.md), the counterpart of runner.ts:
# sets RLIMIT_AS and RLIMIT_CPU (as seed 004's child does), takes the nonce off stdin, closes
# inherited descriptors, installs an audit hook, imports the parser module, says it is ready,
# reads one request, calls one public function of the module and writes one framed response on
# fd 3, then exits without running any exit handler.
#
# With `"forkServer": true` in CONFIG it is a fork server (a zygote, `processModel: 'fork-server'`):
# it sets the same limits (RLIMIT_CPU aside), restrictions and hook, imports the module, and then
# never reads stdin: it forks one child per call, which reads that call's nonce and request,
# applies the call's limits and answers as above. The zygote waits for that child, says how it
# ended on fd 4 (its control channel, which the child closes first thing), and forks the next.
#
# It runs as `python3 -I -B -S runner.py CONFIG`: isolated mode (no environment variables, no
# user site, not even the script's directory on sys.path), no bytecode written, no site import.
# CONFIG is one JSON argument: the module's real path, the readable paths and the limits.
#
# The audit hook is the second line inside the interpreter, where Node has its permission model
# (the first line is the subprocess layer's confinement). It is an allowlist of audit events:
# anything not listed is refused with PermissionError, and the listed ones that touch files are
# checked against the readable paths. Everything the hook and the response need is bound in
# closures before the parser module runs, so a parser that replaces builtins, json, os or sys
# attributes cannot change what is checked or how the response is framed. The nonce lives only
# in the frame of `main`, and every way to reach a frame is refused (sys._getframe, tb_frame,
# gi_frame, sys.settrace, gc.get_referrers, ...), as is every way to build code objects
# (code.__new__, marshal.loads) that could read memory. One way is not: a signal handler is
# handed the frame it interrupts, the runner's own once the parser has returned; so nothing but
# the call's nonce stays in `main`'s locals while parser code can run (the fork gate is cleared).
import gc
import importlib.util
import json
import os
import resource
import signal
import sys


def main():
    # Everything used after the parser module loads is taken now, as locals of this frame.
    read_fd, write_fd, exit_now, set_blocking = os.read, os.write, os._exit, os.set_blocking
    make_pipe, replace_fd, close_fd = os.pipe, os.dup2, os.close
    loads = json.loads
    # The C encoder itself: json.dumps goes through Python code that looks builtins up at run time.
    make_encoder, encode_string = json.encoder.c_make_encoder, json.encoder.c_encode_basestring
    encode_ascii = json.encoder.c_encode_basestring_ascii
    join = "".join
    set_recursion_limit, recursion_limit = sys.setrecursionlimit, sys.getrecursionlimit()
    memory_error, recursion_error = MemoryError, RecursionError
    base_exception, exception = BaseException, Exception
    function_type = type(main)
    to_bytes, from_bytes = int.to_bytes, int.from_bytes
    str_type, bytes_type, int_type, type_of, length, view_of = str, bytes, int, type, len, memoryview
    type_error, plain_exits = TypeError, (SystemExit, KeyboardInterrupt, RecursionError)
    console = (sys.stdout, sys.stderr)
    collect_garbage, freeze_garbage = gc.collect, gc.freeze

    response_fd, control_fd, nonce_bytes, length_bytes = 3, 4, 32, 4
    exit_ok, exit_error, exit_bad_request = 0, 1, 2
    error_message_limit = 16_384

    def fail(message):
        write_fd(2, ("parser runner: " + message + "\n").encode("utf-8", "replace"))
        exit_now(exit_bad_request)

    config = loads(sys.argv[1])
    memory_bytes, cpu_secs = config["memoryBytes"], config["cpuSecs"]
    fork_server_mode = config.get("forkServer") is True
    set_limit, limit_as, limit_cpu = resource.setrlimit, resource.RLIMIT_AS, resource.RLIMIT_CPU

    # The seed's limits, set before any parser code runs. The soft CPU limit is one second under
    # the hard one, so the CPU limit shows as SIGXCPU (a parser that ignores it gets SIGKILL).
    # A zygote has no CPU limit of its own (every fork costs it a little); each call's child sets
    # one, and a forked child's CPU time starts at zero.
    set_limit(limit_as, (memory_bytes, memory_bytes))
    if not fork_server_mode:
        set_limit(limit_cpu, (cpu_secs, cpu_secs + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    def read_exactly(length):
        buffer = bytearray()
        while len(buffer) < length:
            chunk = read_fd(0, length - len(buffer))
            if not chunk:
                return None
            buffer += chunk
        return buffer

    def read_nonce():
        received = read_exactly(nonce_bytes)
        if received is None:
            fail("stdin closed before the nonce arrived")
        return bytes_type(received)

    # The nonce first: once parser code runs, whatever is still in the stdin pipe is readable.
    # (A zygote's children each read their own, before any code of the module runs in them.)
    nonce = None if fork_server_mode else read_nonce()

    # Descriptors inherited without close-on-exec (stdio, the response and control channels aside).
    kept_fd = control_fd if fork_server_mode else response_fd
    for name in os.listdir("/proc/self/fd"):
        fd = int_type(name)
        if fd > kept_fd:
            try:
                if os.get_inheritable(fd):
                    os.close(fd)
            except OSError:
                pass  # the listing's own descriptor, closed by now

    module_path = config["module"]
    module_dir = os.path.dirname(module_path)
    stdlib = [path for path in sys.path if os.path.isdir(path)]
    readable = tuple(path.rstrip("/") for path in [module_dir, *config["readPaths"], *stdlib])
    cwd = os.getcwd()
    # Only the module's directory and the standard library are importable.
    sys.path[:] = [module_dir, *stdlib]
    sys.dont_write_bytecode = True
    # Cached bytecode is not read either: loading it goes through marshal, which can build any
    # code object, so the hook refuses marshal; the module and what it imports compile from source.
    sys.pycache_prefix = cwd + "/.no-bytecode"

    restrict_with_landlock(readable, fork_server_mode)
    as_runner = install_audit_hook(readable, cwd)
    fork = os.fork
    serve_forks = fork_server(lambda: as_runner(fork), console, write_fd, fail, exit_bad_request) if fork_server_mode else None
    # The scheduling calls act on any process of the user's the parser can name, the zygote
    # (whose nice value, policy and CPUs every later child inherits) and, unconfined, the host.
    taken = [(signal, "pidfd_send_signal"), (os, "pidfd_open"), (os, "setpriority")]
    taken += [(os, "sched_setaffinity"), (os, "sched_setscheduler"), (os, "sched_setparam")]
    # A memfd written to and never mapped holds memory in no address space: RLIMIT_AS and the
    # resident-memory watchdog miss it (only a cgroup charges it).
    taken.append((os, "memfd_create"))
    if fork_server_mode:
        # At-fork callbacks would run in every call's child before it reads its nonce. `random`
        # registers its reseed first, so that no two calls' children share its state.
        import random  # noqa: F401
        taken.append((os, "register_at_fork"))
    # No audit event covers these: taken away (under bubblewrap a pid namespace hides the host).
    for owner, attribute in taken:
        if hasattr(owner, attribute):
            delattr(owner, attribute)
            delattr(sys.modules["_signal" if owner is signal else "posix"], attribute)

    def describe(error):
        try:
            message = str_type(error)
            if message == "" or type_of(error) in plain_exits:
                message = type_of(error).__name__ + (": " + message if message else "")
            return message
        except base_exception:  # noqa: BLE001
            return "parser raised an exception that cannot be described"

    def not_json(value):
        raise type_error("Object of type " + type_of(value).__name__ + " is not JSON serializable")

    def encode(value):
        # Compact, UTF-8 text, no NaN or Infinity, circular references refused.
        encoder = make_encoder({}, not_json, encode_string, None, ":", ",", False, False, False)
        return join(encoder(value, 0))

    loaded, load_error = None, None
    try:
        spec = importlib.util.spec_from_file_location("parsers", module_path)
        loaded = importlib.util.module_from_spec(spec)
        sys.modules["parsers"] = loaded
        spec.loader.exec_module(loaded)
    except base_exception as error:  # noqa: BLE001 — any failure is reported after the request
        load_error = "cannot load parser module: " + describe(error)

    def frame(body):
        return nonce + to_bytes(length(body), length_bytes, "big") + body

    def write_all(data):
        view = view_of(data)
        while length(view) > 0:
            view = view[write_fd(response_fd, view):]

    def respond(body_text, code):
        # What the parser printed reaches the host's capture before the child exits.
        for stream in console:
            try:
                stream.flush()
            except base_exception:  # noqa: BLE001 — a closed or broken console loses its tail
                pass
        write_all(frame(body_text.encode("utf-8")))
        exit_now(code)

    def respond_error(kind, message):
        if length(message) > error_message_limit:
            message = message[:error_message_limit] + "…"
        # Escaped to ASCII: a message may hold a lone surrogate (a payload's, or a parser name's),
        # which has no UTF-8; written raw it made the runner crash before answering (a review).
        respond('{"ok":false,"kind":"' + kind + '","error":' + encode_ascii(message) + "}", exit_error)

    if fork_server_mode:
        # Returns in each call's child only; what import left behind is frozen first, so that
        # no finaliser of the module's runs in a child before it has its request.
        collect_garbage()
        freeze_garbage()
        left_open = files_left_open(control_fd)
        serve_forks()
        # The zygote's descriptors are shared with every call's child down to the open file's
        # flags: a call that made its console non-blocking would make the next call's writes
        # fail with BlockingIOError (os.set_blocking raises no audit event).
        for fd in (0, 1, 2, response_fd):
            set_blocking(fd, True)
        reopen_files(left_open, fail)
        nonce = read_nonce()
    else:
        write_all(frame(b""))
    header = read_exactly(length_bytes)
    if header is None:
        fail("stdin closed before a request arrived")
    body = read_exactly(from_bytes(header, "big"))
    if body is None:
        fail("stdin closed in the middle of the request")
    # A request json cannot read is answered, not a crash: uncaught, the runner exited without a
    # response, and in a fork server each such payload cost its slot a new zygote (found by
    # attack reviews: 2 KB nested 1000 deep, 15 MB of empty arrays, a 5000-digit integer).
    # Answered once out of the except block, whose traceback holds what the decoder built.
    unreadable = None
    try:
        request = loads(body.decode("utf-8"))
    except recursion_error:
        # The C decoder stops at the recursion limit (about 990 levels; Node's reads any depth).
        unreadable = (
            "invalid-payload",
            "payload or kwargs nested deeper than Python's json module reads (about "
            + str_type(recursion_limit - 10) + " levels)",
        )
    except memory_error:
        unreadable = (
            "memory-exceeded",
            "memory limit exceeded: MemoryError decoding the payload (RLIMIT_AS "
            + str_type(memory_bytes) + " bytes)",
        )
    except exception as error:
        unreadable = ("invalid-payload", "payload or kwargs Python's json module cannot read: " + describe(error))
    if unreadable is not None:
        body = None
        respond_error(unreadable[0], unreadable[1])
    if type_of(request) is not dict or request.get("v") != 1 or type(request.get("parser")) is not str_type:
        fail("unsupported request (expected protocol version 1)")
    if fork_server_mode:
        # The zygote's stdin carries every call of this slot: the parser, and any process it
        # manages to start, gets an empty one instead (reads see its end, as in a spawned child).
        empty, writer = make_pipe()
        close_fd(writer)
        replace_fd(empty, 0)
        close_fd(empty)
        # This call's limits (the host sends a call here only with memoryBytes at most the
        # zygote's, which the cgroup is sized for).
        memory_bytes, cpu_secs = request["limits"]["memoryBytes"], request["limits"]["cpuSecs"]
        as_runner(set_limit, limit_as, (memory_bytes, memory_bytes))
        as_runner(set_limit, limit_cpu, (cpu_secs, cpu_secs + 1))
    # Out of this frame before parser code runs: a signal handler is handed the frame it
    # interrupts, and once the parser returns that is this one (its locals, the gate among them).
    as_runner = fork = serve_forks = None
    if load_error is not None:
        respond_error("load-error", load_error)

    name = request["parser"]
    # The module's public functions: defined in it (not imported), not starting with "_".
    fn = loaded.__dict__.get(name) if not name.startswith("_") else None
    if type_of(fn) is not function_type or fn.__module__ != "parsers":
        respond_error("unknown-parser", "Unknown parser: " + name)

    kwargs = request.get("kwargs") or {}
    max_output_bytes = request["limits"]["maxOutputBytes"]
    failure, data = None, None
    try:
        data = fn(request["payload"], **kwargs)
    except memory_error:
        # Answered once this block is left: until then the traceback holds the parser's frames,
        # and with them all it allocated, so nothing more could be allocated to answer.
        failure = memory_error
    except base_exception as error:  # SystemExit and KeyboardInterrupt are parser errors too
        failure = describe(error)
    if failure is memory_error:
        respond_error("memory-exceeded", "memory limit exceeded: MemoryError (RLIMIT_AS " + str_type(memory_bytes) + " bytes)")
    if failure is not None:
        respond_error("parser-error", failure)

    # A parser may have raised the recursion limit; encoding deep results must fail cleanly.
    set_recursion_limit(recursion_limit)
    failure = None
    try:
        text = encode(data)
        encoded = text.encode("utf-8")
    except memory_error:
        failure = memory_error
    except (exception, recursion_error) as error:
        failure = "parser result is not JSON: " + describe(error)
    if failure is memory_error:
        respond_error("memory-exceeded", "memory limit exceeded: MemoryError while encoding the result")
    if failure is not None:
        respond_error("invalid-result", failure)
    if length(encoded) > max_output_bytes:
        respond_error(
            "result-too-large",
            "parser result is " + str_type(length(encoded)) + " bytes, over maxOutputBytes ("
            + str_type(max_output_bytes) + ")",
        )
    respond('{"ok":true,"data":' + text + "}", exit_ok)



def fork_server(fork_once, console, write_fd, fail, exit_bad_request):
    # The zygote's loop, bound before the module loads: fork the next call's child at once (so a
    # call does not wait for the fork), wait for it, report on the control channel how it ended,
    # and go on. The zygote is a child subreaper: whatever process a call's child left behind is
    # reparented to it, and waitpid then shows it; the zygote reports it and exits, and the host
    # kills the whole sandbox before another call's bytes reach this stdin. A child that found no
    # request (stdin closed: the host is gone) ends the zygote too, rather than a loop of forks.
    control_fd = 4
    waitpid, no_hang, exit_now, close, str_type = os.waitpid, os.WNOHANG, os._exit, os.close, str
    exited, exit_code, signalled, term_signal = os.WIFEXITED, os.WEXITSTATUS, os.WIFSIGNALED, os.WTERMSIG
    base_exception, os_error, no_child = BaseException, OSError, ChildProcessError
    get_priority, of_process, get_policy = os.getpriority, os.PRIO_PROCESS, os.sched_getscheduler
    get_param, get_cpus = os.sched_getparam, os.sched_getaffinity

    def scheduling():
        # What a call's child may have changed in the zygote from outside (a rebuilt posix still
        # has setpriority and sched_set*), and every later child would inherit.
        return (get_priority(of_process, 0), get_policy(0), get_param(0).sched_priority, get_cpus(0))

    scheduled = scheduling()

    def tell(line):
        data = (line + "\n").encode()
        while data:
            data = data[write_fd(control_fd, data):]

    def serve():
        while True:
            for stream in console:
                try:
                    stream.flush()
                except base_exception:  # noqa: BLE001 — a broken console loses its tail
                    pass
            try:
                pid = fork_once()
            except os_error as error:
                fail("cannot fork a call's child: " + str_type(error))
            if pid == 0:
                close(control_fd)
                return
            tell('{"ready":true}')
            status = waitpid(pid, 0)[1]
            try:
                waitpid(-1, no_hang)
                leftover = "true"
            except no_child:
                leftover = "false"
            if scheduling() != scheduled:
                leftover = "true"  # reported as a leftover: the host kills the slot all the same
            code = str_type(exit_code(status)) if exited(status) else "null"
            signal_number = str_type(term_signal(status)) if signalled(status) else "null"
            tell('{"exitCode":' + code + ',"signal":' + signal_number + ',"leftover":' + leftover + "}")
            if leftover == "true" or code == str_type(exit_bad_request):
                exit_now(3)

    return serve


# The highest descriptor looked at for files the module's import left open (fstat each: the
# zygote cannot list /proc/self/fd under Landlock); import-time code that opens more is unusual.
LEFT_OPEN_SCAN_LIMIT = 1 << 16


def files_left_open(last_runner_fd):
    # The regular files the module's import left open, with where it left their offsets. A
    # forked child shares each one's open file (and so its offset) with the zygote and every
    # other child: a call that read or sought one would move where the next call starts.
    scan_to = min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], LEFT_OPEN_SCAN_LIMIT)
    files = []
    for fd in range(last_runner_fd + 1, scan_to):
        try:
            if os.fstat(fd).st_mode & 0o170000 == 0o100000:
                files.append((fd, os.readlink("/proc/self/fd/" + str(fd)), os.lseek(fd, 0, os.SEEK_CUR)))
        except OSError:
            continue
    return tuple(files)


def reopen_files(files, fail):
    # In a call's child, before its request: each such file opened afresh (an open file of its
    # own) at the offset the import left, so every call starts from the same state.
    for fd, path, offset in files:
        try:
            fresh = os.open(path, os.O_RDONLY)
            os.lseek(fresh, offset, os.SEEK_SET)
            os.dup2(fresh, fd, os.get_inheritable(fd))
            os.close(fresh)
        except OSError as error:
            fail("cannot reopen " + path + " (fd " + str(fd) + ", left open by the module): " + str(error))


# Landlock (Linux 5.13+), the kernel's own allowlist, under the audit hook: it holds even for code
# the hook cannot see (modules rebuilt with _imp.create_builtin, whose fork_exec and
# pidfd_send_signal raise no audit event) and for any process such code starts. Reads only
# beneath the readable paths; no writes, no file creation or removal; no TCP bind or connect
# (ABI 4); no signals to processes outside the domain, the host included, and no abstract Unix
# sockets (ABI 6). Best effort: the parts the kernel's ABI offers are applied, none when it has
# no Landlock (or a seccomp filter refuses its calls); the audit hook applies either way.
LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 444, 445, 446
PR_SET_NO_NEW_PRIVS = 38
READ_ACCESS = 4 | 8  # READ_FILE, READ_DIR
FS_ACCESS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}


PR_SET_CHILD_SUBREAPER = 36


def restrict_with_landlock(readable, subreaper=False):
    if sys.platform != "linux":
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if subreaper and libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        # Without it a call's leftover process would go unseen: refuse to serve.
        os.write(2, b"parser runner: cannot become a child subreaper\n")
        os._exit(2)
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    abi = syscall(LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return
    fs = max(access for version, access in FS_ACCESS_BY_ABI.items() if version <= abi)

    class RulesetAttr(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    attr = RulesetAttr(fs, 3 if abi >= 4 else 0, 3 if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = syscall(LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return
    try:
        for path in readable:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                # A file (allowRead may name one) takes only the file rights.
                allowed = READ_ACCESS if os.path.isdir(path) else 4
                rule = PathBeneath(allowed, fd)
                syscall(LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(1), ctypes.byref(rule), ctypes.c_uint32(0))
            finally:
                os.close(fd)
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        syscall(LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
        # Out of sys.modules again, so that a parser's `import ctypes` meets the audit hook.
        for name in [name for name in sys.modules if name == "ctypes" or name.startswith(("ctypes.", "_ctypes"))]:
            del sys.modules[name]


# Audit events a parser may cause, beyond those checked below. Every other event is refused:
# sockets, subprocess, os.system/exec/fork/posix_spawn/spawn, os.kill/killpg, signal.pthread_kill,
# ctypes, mmap, sys.settrace/setprofile, sys._current_frames, gc.get_objects/referrers/referents,
# code.__new__, marshal, writes of any kind (os.remove, os.mkdir, shutil, tempfile, sqlite3, ...).
ALLOWED_EVENTS = frozenset({
    "compile",
    "exec",
    "builtins.id",
    "object.__setattr__",
    "object.__delattr__",
    "function.__new__",
    "time.sleep",
    "array.__new__",
    "pickle.find_class",
    "locale.setlocale",
    "os.putenv",
    "os.unsetenv",
    "glob.glob",
    "glob.glob/2",
    "re.compile",
    "cpython._PySys_ClearAuditHooks",
    "cpython.PyInterpreterState_Clear",
    "sys.excepthook",
    "sys.unraisablehook",
})

# Audit events only the runner itself causes, through `as_runner`: a zygote's fork of a call's
# child, and that child setting the call's limits.
RUNNER_EVENTS = frozenset({"os.fork", "resource.setrlimit"})

# Modules that cannot be imported: the ones whose only use here is a door out.
REFUSED_MODULES = frozenset({
    "ctypes", "_ctypes", "socket", "_socket", "ssl", "_ssl", "mmap", "_posixsubprocess",
    "subprocess", "multiprocessing", "_multiprocessing", "pty", "termios", "fcntl", "_sqlite3",
    "sqlite3", "asyncio", "selectors", "select", "_tracemalloc",
})

# Attributes that lead to a frame (and so to the runner's locals, the nonce among them).
FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"})


def install_audit_hook(readable, cwd):
    # Bound here, never looked up at run time: a parser can replace builtins and module attributes.
    # Returns `as_runner`, the one way past it for a zygote and its children: it calls a function
    # with the gate open to RUNNER_EVENTS (fork, setrlimit) for that call only. Neither it nor its
    # gate is reachable from parser code (no frames, no gc), and the gate never opens on its own.
    allowed, refused_modules, frame_attributes = ALLOWED_EVENTS, REFUSED_MODULES, FRAME_ATTRIBUTES
    runner_events, gate = RUNNER_EVENTS, [False]
    str_type, bytes_type, int_type, tuple_type, type_of, length = str, bytes, int, tuple, type, len
    permission_error, value_error = PermissionError, ValueError
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    decode = os.fsdecode

    class RefusedToParsers(permission_error):
        pass

    class StackHidden(value_error):
        # A ValueError, as sys._getframe raises past the top of the stack: namedtuple, enum and
        # typing.NamedTuple catch it and go on without the caller's module name.
        pass

    def refuse(event):
        raise RefusedToParsers("audit hook: " + event + " is not available to parsers")

    def normalise(path):
        if type_of(path) is bytes_type:
            path = decode(path)
        if type_of(path) is not str_type or "\0" in path:
            return None
        if not path.startswith("/"):
            path = cwd + "/" + path
        parts = []
        for part in path.split("/"):
            if part == "" or part == ".":
                continue
            if part == "..":
                if parts:
                    parts.pop()
                continue
            parts.append(part)
        return "/" + "/".join(parts)

    def may_read(path):
        normal = normalise(path)
        if normal is None:
            return False
        for root in readable:
            if normal == root or normal.startswith(root + "/"):
                return True
        return False

    def hook(event, args):
        if event in allowed:
            return
        if gate[0] and event in runner_events:
            return
        if event == "open":
            path, _mode, flags = args
            if type_of(flags) is int_type and flags & write_flags:
                refuse("opening a file for writing (" + str_type(path) + ")")
            if type_of(path) is int_type or may_read(path):
                return
            refuse("opening " + str_type(path) + " (outside the readable paths)")
        if event == "os.listdir" or event == "os.scandir":
            path = args[0] if type_of(args) is tuple_type and length(args) > 0 else None
            if path is None or may_read(path):
                return
            refuse(event + " of " + str_type(path))
        if event == "import":
            name = args[0]
            if type_of(name) is str_type and name.split(".")[0] in refused_modules:
                refuse("import of " + name)
            return
        if event == "object.__getattr__":
            if args[1] in frame_attributes:
                refuse("the attribute " + str_type(args[1]))
            return
        if event == "sys._getframe" or event == "sys._getframemodulename":
            raise StackHidden("audit hook: " + event + " is not available to parsers")
        refuse(event)

    def as_runner(function, *args):
        gate[0] = True
        try:
            return function(*args)
        finally:
            gate[0] = False

    sys.addaudithook(hook)
    return as_runner


if __name__ == "__main__":
    main()
