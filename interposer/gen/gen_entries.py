#!/usr/bin/env python3
"""Generate the interposer's driver entry-point tables from the CUDA headers.

This generator owns everything in the interposer that is derived from the driver's headers (the
pairs in DRIVER_HEADERS: cuda.h with cudaTypedefs.h, cudaProfiler.h with
cudaProfilerTypedefs.h): the list of exported driver symbols, their weak default stubs, the
linker version script, the version table behind cuGetProcAddress, the CUresult names and
strings, and the list of queries the GPU-host cross-check asks the real driver. It never
guesses: an API version from a typedefs header that cannot be matched to exactly one exported
symbol stops the build (exit 1), so a new CUDA header is either understood or refused, never
half-served.

Inputs (each group run through the C preprocessor at once, with -D__CUDA_API_VERSION_INTERNAL,
which makes the headers declare every exported symbol: legacy _v1-era names and the
_ptsz/_ptds variants too):
  declaring headers (cuda.h, cudaProfiler.h)
                  -> the exported symbols and their parameter types; from cuda.h also the
                     CUresult enum (read from the raw text as well, for the doc comments) and
                     the #define block that names what each API means today
  typedefs headers (cudaTypedefs.h, cudaProfilerTypedefs.h)
                  -> PFN_<api>_v<version>[_ptsz|_ptds]: every (API name, version) that
                     cuGetProcAddress answers, with the parameter types of that version
The export list must equal the exports of the toolkit's stub libcuda.so (check_exports.py
--stub compares them after every link). NOT_DRIVER_HEADERS lists the driver headers of the
toolkit that are deliberately not read, and why.

Mapping rule, for each API name N and each version V of N (ascending):
  candidates = exported symbols N, N_v2, N_v3, ... (with _ptsz/_ptds appended for the
  per-thread typedefs) whose canonical parameter types equal those of PFN_N_vV; typedef chains
  are resolved through the headers, so CUdeviceptr_v2 == CUdeviceptr == unsigned long long,
  while CUdeviceptr_v1 (unsigned int) stays different. If several match (the signature did not
  change between two versions, only the semantics), the k-th version takes N_vk (the first
  takes N). OVERRIDES below adds the few (name, version) pairs whose symbol is not of N's
  family.
Checks that fail the build: an unmappable (name, version); a symbol used by two versions of a
name; an override naming an unknown symbol; the #define block at the top of cuda.h (which says
what N means for code compiled against this header) disagreeing with our mapping at
CUDA_VERSION; a hand-written error string naming an unknown CUresult.

Usage: gen_entries.py --cc CC --include CUDA_INCLUDE_DIR --outdir DIR
       gen_entries.py --list-inputs     (the header names it reads, one a line, for the build)
Writes DIR/{entries_gen.c, procaddr_gen.c, errors_gen.c, exports.map, procaddr_queries.txt}
and prints the counts. Python 3 standard library only.
"""

import argparse
import os
import re
import shlex
import subprocess
import sys

# The headers the driver library's exports come from: (declaring header, its typedefs header).
# Every function a declaring header declares is exported; every PFN_ typedef of its typedefs
# header is served by cuGetProcAddress.
DRIVER_HEADERS = (
    ("cuda.h", "cudaTypedefs.h"),
    ("cudaProfiler.h", "cudaProfilerTypedefs.h"),     # cuProfilerInitialize/Start/Stop
)

# Driver headers of the toolkit that are not read: the CUDA 13.0 stub libcuda.so exports none
# of their functions (driver 580.159.04 itself does export them), and each needs the headers
# of a graphics stack (GL, VDPAU, EGL) to be preprocessed at all. rgpu serves no graphics
# interop, so leaving them out keeps the export list equal to the stub's.
NOT_DRIVER_HEADERS = {
    "cudaGL.h": "OpenGL interop (cuGL*, cuGraphicsGL*, cuWGLGetDevice); needs GL/gl.h",
    "cudaVDPAU.h": "VDPAU interop (cuVDPAU*, cuGraphicsVDPAU*); needs vdpau/vdpau.h",
    "cudaEGL.h": "EGL interop (cuEGL*, cuGraphicsEGL*, cuEventCreateFromEGLSync); needs EGL",
}

# (API name, version) -> symbol, for the names whose symbol at some version is not one of
# N, N_v2, N_v3, ... Each entry needs a reason.
OVERRIDES = {
}

# API names for which the real driver's cuGetProcAddress disagrees with cuda.h's #define block,
# measured on driver 580.159.04 (tests/gpu/procaddr_dump): cuda.h maps cuGraphInstantiate to
# cuGraphInstantiateWithFlags at compile time, but asked by name at 12000 and 13000 the driver
# answers cuGraphInstantiate_v2 (the five-argument form of PFN_cuGraphInstantiate_v11000).
# Runtimes ask for "cuGraphInstantiateWithFlags" by that name when they want it.
DEFINE_CHECK_EXEMPT = {"cuGraphInstantiate"}

# Strings the real driver's cuGetErrorString returns for the common codes. Every other code
# gets the first sentence of its doc comment in cuda.h.
DRIVER_STRINGS = {
    "CUDA_SUCCESS": "no error",
    "CUDA_ERROR_INVALID_VALUE": "invalid argument",
    "CUDA_ERROR_OUT_OF_MEMORY": "out of memory",
    "CUDA_ERROR_NOT_INITIALIZED": "initialization error",
    "CUDA_ERROR_DEINITIALIZED": "driver shutting down",
    "CUDA_ERROR_PROFILER_DISABLED": "profiler disabled while using external profiling tool",
    "CUDA_ERROR_PROFILER_ALREADY_STARTED": "profiler already started",
    "CUDA_ERROR_PROFILER_ALREADY_STOPPED": "profiler already stopped",
    "CUDA_ERROR_STUB_LIBRARY": "CUDA driver is a stub library",
    "CUDA_ERROR_DEVICE_UNAVAILABLE": "CUDA-capable device(s) is/are busy or unavailable",
    "CUDA_ERROR_NO_DEVICE": "no CUDA-capable device is detected",
    "CUDA_ERROR_INVALID_DEVICE": "invalid device ordinal",
    "CUDA_ERROR_INVALID_IMAGE": "device kernel image is invalid",
    "CUDA_ERROR_INVALID_CONTEXT": "invalid device context",
    "CUDA_ERROR_CONTEXT_ALREADY_CURRENT": "context already current",
    "CUDA_ERROR_MAP_FAILED": "mapping of buffer object failed",
    "CUDA_ERROR_UNMAP_FAILED": "unmapping of buffer object failed",
    "CUDA_ERROR_ARRAY_IS_MAPPED": "array is mapped",
    "CUDA_ERROR_ALREADY_MAPPED": "resource already mapped",
    "CUDA_ERROR_NO_BINARY_FOR_GPU": "no kernel image is available for execution on the device",
    "CUDA_ERROR_ALREADY_ACQUIRED": "resource already acquired",
    "CUDA_ERROR_NOT_MAPPED": "resource not mapped",
    "CUDA_ERROR_NOT_MAPPED_AS_ARRAY": "resource not mapped as array",
    "CUDA_ERROR_NOT_MAPPED_AS_POINTER": "resource not mapped as pointer",
    "CUDA_ERROR_ECC_UNCORRECTABLE": "uncorrectable ECC error encountered",
    "CUDA_ERROR_UNSUPPORTED_LIMIT": "limit is not supported on this architecture",
    "CUDA_ERROR_CONTEXT_ALREADY_IN_USE":
        "exclusive-thread device already in use by a different thread",
    "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED":
        "peer access is not supported between these two devices",
    "CUDA_ERROR_INVALID_PTX": "a PTX JIT compilation failed",
    "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT": "invalid OpenGL or DirectX context",
    "CUDA_ERROR_JIT_COMPILER_NOT_FOUND": "PTX JIT compiler library not found",
    "CUDA_ERROR_INVALID_SOURCE": "device kernel image is invalid",
    "CUDA_ERROR_FILE_NOT_FOUND": "file not found",
    "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND": "shared object symbol not found",
    "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED": "shared object initialization failed",
    "CUDA_ERROR_OPERATING_SYSTEM": "OS call failed or operation not supported on this OS",
    "CUDA_ERROR_INVALID_HANDLE": "invalid resource handle",
    "CUDA_ERROR_ILLEGAL_STATE": "the operation cannot be performed in the present state",
    "CUDA_ERROR_NOT_FOUND": "named symbol not found",
    "CUDA_ERROR_NOT_READY": "device not ready",
    "CUDA_ERROR_ILLEGAL_ADDRESS": "an illegal memory access was encountered",
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": "too many resources requested for launch",
    "CUDA_ERROR_LAUNCH_TIMEOUT": "the launch timed out and was terminated",
    "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING": "launch uses incompatible texturing mode",
    "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED": "peer access is already enabled",
    "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED": "peer access has not been enabled",
    "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE": "cannot set while device is active in this process",
    "CUDA_ERROR_CONTEXT_IS_DESTROYED": "context is destroyed",
    "CUDA_ERROR_ASSERT": "device-side assert triggered",
    "CUDA_ERROR_TOO_MANY_PEERS": "peer mapping resources exhausted",
    "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED":
        "part or all of the requested memory range is already mapped",
    "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED":
        "pointer does not correspond to a registered memory region",
    "CUDA_ERROR_HARDWARE_STACK_ERROR": "hardware stack error",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION": "an illegal instruction was encountered",
    "CUDA_ERROR_MISALIGNED_ADDRESS": "misaligned address",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE": "operation not supported on global/shared address space",
    "CUDA_ERROR_INVALID_PC": "invalid program counter",
    "CUDA_ERROR_LAUNCH_FAILED": "unspecified launch failure",
    "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE": "too many blocks in cooperative launch",
    "CUDA_ERROR_NOT_PERMITTED": "operation not permitted",
    "CUDA_ERROR_NOT_SUPPORTED": "operation not supported",
    "CUDA_ERROR_SYSTEM_NOT_READY": "system not yet initialized",
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH":
        "system has unsupported display driver / cuda driver combination",
    "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED": "operation not permitted when stream is capturing",
    "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED":
        "operation failed due to a previous error during capture",
    "CUDA_ERROR_STREAM_CAPTURE_MERGE":
        "operation would result in a merge of separate capture sequences",
    "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED": "capture was not ended in the same stream as it began",
    "CUDA_ERROR_STREAM_CAPTURE_UNJOINED": "capturing stream has unjoined work",
    "CUDA_ERROR_STREAM_CAPTURE_ISOLATION":
        "dependency created on uncaptured work in another stream",
    "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT":
        "operation would make the legacy stream depend on a capturing blocking stream",
    "CUDA_ERROR_CAPTURED_EVENT":
        "operation not permitted on an event last recorded in a capturing stream",
    "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD":
        "attempt to terminate a thread-local capture sequence from another thread",
    "CUDA_ERROR_TIMEOUT": "wait operation timed out",
    "CUDA_ERROR_UNKNOWN": "unknown error",
    # measured on driver 580.159.04 (tests/gpu/procaddr_dump "error N" lines)
    "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER": "API call is not supported in the installed CUDA driver",
    "CUDA_ERROR_CDP_NOT_SUPPORTED": "is using CUDA Dynamic Parallelism, but the current configuration, like MPS, does not support it",
    "CUDA_ERROR_CDP_VERSION_MISMATCH": "unsupported interaction between different versions of CUDA Dynamic Parallelism",
    "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE": "forward compatibility was attempted on non supported HW",
    "CUDA_ERROR_CONTAINED": "Invalid access of peer GPU memory over nvlink or a hardware error",
    "CUDA_ERROR_DEVICE_NOT_LICENSED": "device doesn't have valid Grid license",
    "CUDA_ERROR_EXTERNAL_DEVICE": "an async error has occured in external entity outside of CUDA",
    "CUDA_ERROR_FUNCTION_NOT_LOADED": "the function handle is not loaded when calling an API that requires a loaded function",
    "CUDA_ERROR_INVALID_CLUSTER_SIZE": "a kernel launch error has occurred due to cluster misconfiguration",
    "CUDA_ERROR_JIT_COMPILATION_DISABLED": "PTX JIT compilation was disabled",
    "CUDA_ERROR_LOSSY_QUERY": "attempted introspection would be semantically lossy",
    "CUDA_ERROR_MPS_CONNECTION_FAILED": "MPS client failed to connect to the MPS control daemon or the MPS server",
    "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED": "the hardware resources required to support device connections have been exhausted",
    "CUDA_ERROR_MPS_SERVER_NOT_READY": "MPS server is not ready to accept new MPS client requests",
    "CUDA_ERROR_NVLINK_UNCORRECTABLE": "uncorrectable NVLink error detected during the execution",
    "CUDA_ERROR_PROFILER_NOT_INITIALIZED": "profiler not initialized: call cudaProfilerInitialize()",
    "CUDA_ERROR_TENSOR_MEMORY_LEAK": "tensor memory not completely freed",
    "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC": "the provided PTX contains unsupported call to cudaDeviceSynchronize",
    "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY": "the provided execution affinity is not supported",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": "the provided PTX was compiled with an unsupported toolchain.",
}

# Versions the cross-check asks every API at, besides its own versions and 10 below its first
# (the driver we emulate).
EXTRA_QUERY_VERSIONS = (13000,)
# Queries that pin down the decisions cuda.h leaves open; the real driver's answers to them are
# compared like the rest. '""' is the empty name.
SPECIAL_QUERIES = (
    ('""', 0, 0),                       # the runtime's first probe
    ("cuNoSuchFunction", 13000, 0),     # unknown name
    ("cuMemAlloc_v2", 13000, 0),        # exact symbol name instead of the base name
    ("cuMemAlloc_v2", 13000, 2),
    ("cuMemcpyHtoDAsync_v2", 13000, 0),
    ("cuStreamQuery_ptsz", 13000, 0),
    ("cuGetProcAddress_v2", 13000, 0),
    ("cuInit", 1000, 0),                # below the first version
    ("cuInit", 13010, 0),               # above the driver version
    ("cuInit", 99000, 0),
    ("cuInit", 13000, 1),               # legacy-stream flag
    ("cuStreamQuery", 13000, 1),
    ("cuStreamQuery", 13000, 3),        # both stream flags
    ("cuInit", 13000, 4),               # undefined flag bit
    ("cuMemcpyHtoDAsync", 3020, 2),     # per-thread asked below the first _ptsz version
    ("cuMemcpyHtoDAsync", 6050, 2),
    ("cuGraphInstantiate", 11040, 0),
    ("cuGraphInstantiate", 12000, 0),
    # The 4-argument cuGetProcAddress of CUDA 11.3 ("v1": procaddr_dump calls that one).
    ("cuMemAlloc", 11030, 0, "v1"),
    ("cuStreamQuery", 11030, 2, "v1"),
    ('""', 0, 0, "v1"),
    ("cuNoSuchFunction", 11030, 0, "v1"),
    ("cuLibraryLoadData", 11030, 0, "v1"),
    ("cuInit", 13010, 0, "v1"),
)

BUILTIN_TYPE_WORDS = {"void", "char", "short", "int", "long", "float", "double", "signed",
                      "unsigned", "_Bool", "size_t"}
QUALIFIERS = {"const", "volatile", "restrict", "__restrict", "__restrict__"}
TOKEN_RE = re.compile(r"[A-Za-z_]\w*|\d+|\S")


def die(msg):
    sys.stderr.write("gen_entries.py: error: %s\n" % msg)
    sys.exit(1)


def preprocess(cc, incdir, headers):
    """The headers, included in this order into one translation unit, preprocessed."""
    for h in headers:
        if not os.path.isfile(os.path.join(incdir, h)):
            die("%s not found in %s" % (h, incdir))
    cmd = shlex.split(cc) + ["-E", "-P", "-D__CUDA_API_VERSION_INTERNAL", "-I", incdir,
                             "-x", "c", "-"]
    source = "".join('#include "%s"\n' % h for h in headers)
    try:
        res = subprocess.run(cmd, input=source, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True, check=False)
    except OSError as e:
        die("cannot run %s: %s" % (cmd[0], e))
    if res.returncode != 0:
        die("preprocessing %s failed:\n%s" % (", ".join(headers), res.stderr))
    return res.stdout


def statements(text):
    """Top-level C statements (split at ';' outside any bracket), whitespace collapsed."""
    text = re.sub(r"\s+", " ", text)
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif ch == ";" and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    return out


def split_top(s, sep=","):
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(s):
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(s[start:i].strip())
            start = i + 1
    parts.append(s[start:].strip())
    return parts


class Types:
    """Resolves typedef chains of the preprocessed driver headers to canonical token lists."""

    def __init__(self, stmts):
        self.alias = {}
        for st in stmts:
            if not st.startswith("typedef ") or "(" in st:
                continue
            body = st[len("typedef "):]
            m = re.match(r"^(.*?)\s*(\w+)$", body)
            if not m:
                continue
            target, name = m.group(1), m.group(2)
            if "{" in target:
                # typedef struct TAG {...} NAME: keep "struct TAG"; anonymous: NAME itself.
                head = target[:target.index("{")].split()
                if len(head) < 2:
                    continue
                target = " ".join(head[:2])
            self.alias[name] = TOKEN_RE.findall(target)

    def canon(self, tokens, depth=0):
        if depth > 32:
            die("typedef loop at %s" % " ".join(tokens))
        out = []
        for i, t in enumerate(tokens):
            prev = tokens[i - 1] if i else ""
            if t in self.alias and prev not in ("struct", "enum", "union"):
                out.extend(self.canon(self.alias[t], depth + 1))
            else:
                out.append(t)
        # "long unsigned int" (size_t) and "unsigned long int" (uint64_t) are one type: put each
        # run of builtin type words in a fixed order.
        i = 0
        while i < len(out):
            j = i
            while j < len(out) and out[j] in BUILTIN_TYPE_WORDS:
                j += 1
            if j > i + 1:
                out[i:j] = sorted(out[i:j])
            i = max(j, i + 1)
        return out


def param_types(params, types):
    """Canonical parameter types of a parameter list, names dropped."""
    params = params.strip()
    if params in ("", "void"):
        return ()
    out = []
    for p in split_top(params):
        toks = TOKEN_RE.findall(p)
        is_array = False
        if toks and toks[-1] == "]":
            toks = toks[:toks.index("[")]
            is_array = True
        # Drop the parameter name: a trailing identifier that is not a type word, preceded by
        # something that still names a type.
        if (len(toks) >= 2 and re.match(r"^[A-Za-z_]\w*$", toks[-1])
                and toks[-1] not in BUILTIN_TYPE_WORDS and toks[-1] not in QUALIFIERS):
            toks = toks[:-1]
        if is_array:
            toks = toks + ["*"]
        out.append(" ".join(types.canon(toks)))
    return tuple(out)


def parse_functions(stmts, types):
    funcs = {}
    for st in stmts:
        if st.startswith("typedef"):
            continue
        m = re.match(r"^(?:extern )?(?:__attribute__ ?\(\(.*?\)\) )?CUresult (cu\w+) ?\((.*)\)$",
                     st)
        if not m:
            continue
        name, params = m.group(1), m.group(2)
        sig = param_types(params, types)
        if name in funcs and funcs[name] != sig:
            die("%s declared twice with different parameters" % name)
        funcs[name] = sig
    return funcs


def parse_pfns(stmts, types):
    pfns = []
    for st in stmts:
        m = re.match(r"^typedef CUresult ?\( ?\* ?PFN_(\w+?)_v(\d+)(_ptsz|_ptds)?\) ?\((.*)\)$",
                     st)
        if m:
            pfns.append((m.group(1), int(m.group(2)), m.group(3) or "",
                         param_types(m.group(4), types)))
        elif "PFN_" in st and st.startswith("typedef"):
            die("cannot parse typedef: %s" % st[:200])
    return pfns


def family(name, funcs, suffix):
    """Exported symbols of API name's family, ordinal -> symbol (1 = bare name)."""
    fam = {}
    if name + suffix in funcs:
        fam[1] = name + suffix
    for k in range(2, 20):
        s = "%s_v%d%s" % (name, k, suffix)
        if s in funcs:
            fam[k] = s
    return fam


def map_versions(name, vers, funcs, suffix, plain=()):
    """[(version, sig)] ascending -> [(version, symbol)]; dies on anything ambiguous.

    Ties (same parameters, new semantics) go to the k-th member of the family for the k-th
    version; for a per-thread typedef, to the variant of the plain symbol serving that version
    (plain: the already mapped [(version, symbol)] of the name).
    """
    fam = family(name, funcs, suffix)
    out, used = [], {}
    for ordinal, (ver, sig) in enumerate(vers, 1):
        matches = sorted(k for k, s in fam.items() if funcs[s] == sig)
        if not matches:
            die("PFN_%s_v%d%s: no exported symbol of %s has parameters (%s); family: %s"
                % (name, ver, suffix, name, ", ".join(sig),
                   ", ".join(fam.values()) or "none"))
        base = [s for v, s in plain if v <= ver]
        want = [k for k in matches if suffix and base and fam[k] == base[-1] + suffix]
        if len(matches) == 1:
            k = matches[0]
        elif want:
            k = want[0]
        elif not suffix and ordinal in matches:
            k = ordinal
        else:
            die("PFN_%s_v%d%s: ambiguous, %s all match"
                % (name, ver, suffix, ", ".join(fam[k] for k in matches)))
        sym = fam[k]
        if sym in used and not suffix:
            die("%s would serve both version %d and %d of %s" % (sym, used[sym], ver, name))
        used[sym] = ver
        out.append((ver, sym))
    return out


def parse_defines(raw):
    """The '#define cuX cuY' block of cuda.h: name -> (symbol, stream macro or '')."""
    out = {}
    for m in re.finditer(r"^\s*#define\s+(cu\w+)\s+(?:(__CUDA_API_PT[DS][SZ])\((\w+)\)|(cu\w+))"
                         r"\s*$", raw, re.M):
        if m.group(3):
            out[m.group(1)] = (m.group(3), m.group(2))
        else:
            out[m.group(1)] = (m.group(4), "")
    return out


def parse_cuda_version(raw):
    m = re.search(r"^#define\s+CUDA_VERSION\s+(\d+)", raw, re.M)
    if not m:
        die("CUDA_VERSION not found in cuda.h")
    return int(m.group(1))


def clean_doc(doc):
    doc = re.sub(r"^\s*/\*\*|\*/\s*$", "", doc)
    lines = [re.sub(r"^\s*\*\s?", "", l) for l in doc.splitlines()]
    text = " ".join(l for l in lines if l.strip())
    text = re.sub(r"\\(deprecated|note)\b", "", text)
    text = re.sub(r"\\[a-z]+\s+", "", text)          # \p x, \ref x, \e x -> x
    text = text.replace("::", "")
    return re.sub(r"\s+", " ", text).strip()


def first_sentence(text):
    m = re.match(r"(.*?[.!?])(\s+[A-Z(]|\s*$)", text)
    s = m.group(1) if m else text
    s = re.sub(r"^(This (error )?)?[Ii]ndicates (that )?", "", s)
    s = s.rstrip(".")
    if s and s[0].isupper() and not s[:2].isupper():
        s = s[0].lower() + s[1:]
    return s


def parse_cuerrors(raw, pp_stmts):
    m = re.search(r"typedef enum cudaError_enum\s*\{(.*?)\}\s*CUresult\s*;", raw, re.S)
    if not m:
        die("CUresult enum not found in cuda.h")
    body = m.group(1)
    errs = []
    for em in re.finditer(r"(/\*\*.*?\*/)?\s*(CUDA_\w+)\s*(?:=\s*([^,}/]*))?,?", body, re.S):
        value = (em.group(3) or "").strip()
        if not re.match(r"^\d+$", value):
            die("CUresult %s: no literal value (%r)" % (em.group(2), value))
        errs.append((em.group(2), int(value), clean_doc(em.group(1) or "")))
    # Cross-check against the preprocessed enum: same names, same order.
    pp = [s for s in pp_stmts if s.startswith("typedef enum cudaError_enum")]
    if len(pp) != 1:
        die("CUresult enum not found in preprocessed cuda.h")
    pp_names = re.findall(r"\b(CUDA_\w+)\b", pp[0])
    if pp_names != [e[0] for e in errs]:
        die("CUresult enum: raw and preprocessed cuda.h disagree")
    return errs


def c_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def banner(what, source):
    return ("/*\n * GENERATED by interposer/gen/gen_entries.py from %s -- do not edit.\n"
            " *\n * %s\n */\n" % (source, what))


def write(path, text):
    tmp = "%s.%d.tmp" % (path, os.getpid())  # two make jobs may run the rule at once
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def by_header(cc, incdir, headers, parse):
    """parse() of the headers included together, and what each one adds to those before it:
    [(header, set of new names)]. A header that adds nothing stops the build: it is listed to
    be read, so finding nothing in it means it is no longer understood."""
    seen, per = set(), []
    for i, h in enumerate(headers):
        got = set(parse(statements(preprocess(cc, incdir, headers[:i + 1]))))
        new = got - seen
        if not new:
            die("%s: nothing found in it (parsed together with %s)"
                % (h, ", ".join(headers[:i]) or "nothing else"))
        per.append((h, new))
        seen |= got
    return per


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("--include", help="CUDA include directory")
    ap.add_argument("--outdir")
    ap.add_argument("--list-inputs", action="store_true",
                    help="print the headers read (names relative to --include) and exit")
    args = ap.parse_args()
    decl_headers = [d for d, _ in DRIVER_HEADERS]
    td_headers = [t for _, t in DRIVER_HEADERS]
    if args.list_inputs:
        print("\n".join(decl_headers + td_headers))
        return 0
    if not args.include or not args.outdir:
        ap.error("--include and --outdir are required")

    with open(os.path.join(args.include, "cuda.h")) as f:
        raw = f.read()
    raw_decl = raw
    for h in decl_headers[1:]:
        with open(os.path.join(args.include, h)) as f:
            raw_decl += "\n" + f.read()
    cuda_version = parse_cuda_version(raw)
    cuda_stmts = statements(preprocess(args.cc, args.include, decl_headers))
    types = Types(cuda_stmts)
    funcs = parse_functions(cuda_stmts, types)
    if not funcs:
        die("no driver functions found in %s" % ", ".join(decl_headers))
    decl_per = by_header(args.cc, args.include, decl_headers,
                         lambda st: parse_functions(st, types))
    td_stmts = statements(preprocess(args.cc, args.include, td_headers))
    pfns = parse_pfns(td_stmts, types)
    td_per = by_header(args.cc, args.include, td_headers,
                       lambda st: set(p[0] for p in parse_pfns(st, types)))
    errors = parse_cuerrors(raw, cuda_stmts)
    defines = parse_defines(raw_decl)
    sources = ", ".join(decl_headers + td_headers)

    # ---- (name, version) -> symbol -------------------------------------------------------
    by_name = {}
    for name, ver, suffix, sig in pfns:
        by_name.setdefault(name, {}).setdefault(suffix, []).append((ver, sig))
    table = {}          # name -> sorted [(version, symbol, is_ptds)]
    for name in sorted(by_name):
        rows, plain = [], []
        if "" not in by_name[name]:
            die("PFN_%s: per-thread versions only" % name)
        for suffix, vers in sorted(by_name[name].items()):    # "" (plain) sorts first
            vers.sort()
            if len(set(v for v, _ in vers)) != len(vers):
                die("PFN_%s: version listed twice" % name)
            mapped = map_versions(name, vers, funcs, suffix, plain)
            if not suffix:
                plain = mapped
            for ver, sym in mapped:
                rows.append((ver, sym, 1 if suffix else 0))
        table[name] = rows
    for (name, ver), sym in sorted(OVERRIDES.items()):
        if sym not in funcs:
            die("override (%s, %d) names %s, which no driver header declares" % (name, ver, sym))
        if name not in table:
            die("override (%s, %d): no such API name in %s" % (name, ver, ", ".join(td_headers)))
        if any(v == ver and not p for v, _, p in table[name]):
            die("override (%s, %d) shadows a version the typedefs headers define"
                % (name, ver))
        table[name].append((ver, sym, 0))
    for name in table:
        # Ascending version; at equal versions the plain symbol comes before the per-thread.
        table[name].sort(key=lambda r: (r[0], r[2]))

    # The #define block says what each name means at CUDA_VERSION for code built with this
    # header; our table must agree (PTSZ/PTDS macros name the per-thread variant).
    def resolve(name, ver, ptds):
        best = None
        for v, s, p in table[name]:
            if v <= ver and (p == 0 or ptds):
                best = s
        return best

    for name, (sym, macro) in sorted(defines.items()):
        if name not in table or name in DEFINE_CHECK_EXEMPT:
            continue        # e.g. "#define cuStreamGetCtx_v2 ...": not an API name
        if sym == name:
            # "#define cuStreamQuery __CUDA_API_PTSZ(cuStreamQuery)": only says which
            # per-thread symbol pairs with the plain one, not what the name means today.
            want = sym + ("_ptds" if macro.endswith("PTDS") else "_ptsz")
            if not any(s == want and p for _, s, p in table[name]):
                die("cuda.h pairs %s with %s, our table does not serve it" % (name, want))
            continue
        got = resolve(name, cuda_version, 0)
        if got != sym:
            die("cuda.h says %s means %s, our table gives %s at %d"
                % (name, sym, got, cuda_version))
        if macro:
            want = sym + ("_ptds" if macro.endswith("PTDS") else "_ptsz")
            got = resolve(name, cuda_version, 1)
            if got != want:
                die("cuda.h says per-thread %s means %s, our table gives %s"
                    % (name, want, got))

    served = set(s for rows in table.values() for _, s, _ in rows)
    unserved = sorted(set(funcs) - served)
    names = sorted(funcs)
    index = {n: i for i, n in enumerate(names)}
    n_pairs = sum(len(r) for r in table.values())
    n_plain = sum(1 for rows in table.values() for r in rows if not r[2])

    os.makedirs(args.outdir, exist_ok=True)

    # ---- entries_gen.c -------------------------------------------------------------------
    o = [banner("One weak default stub per driver symbol the driver headers declare (with\n"
                " * -D__CUDA_API_VERSION_INTERNAL), and ip_entries[], sorted by name. A stub logs\n"
                " * the name once (ip_unimplemented) and returns CUDA_ERROR_NOT_SUPPORTED; a strong\n"
                " * definition anywhere in the interposer replaces it at link time, and ip_entries[]\n"
                " * then points at that definition. The stubs take no arguments: on x86-64 SysV a\n"
                " * callee that ignores its arguments is safe to call with any, and every driver\n"
                " * function returns CUresult (an int). cuda.h is not included: its prototypes would\n"
                " * clash with these.", ", ".join(decl_headers)),
         "#define IP_ENTRIES_NO_CUDA_H\n#include \"ip_entries.h\"\n\n",
         "#define IP_CUDA_ERROR_NOT_SUPPORTED %d\n\n" % dict(
             (e[0], e[1]) for e in errors)["CUDA_ERROR_NOT_SUPPORTED"],
         "#define IP_STUB(fn)                                            \\\n"
         "\t__attribute__((weak, visibility(\"default\"))) int fn(void); \\\n"
         "\t__attribute__((weak, visibility(\"default\"))) int fn(void)  \\\n"
         "\t{                                                      \\\n"
         "\t\tip_unimplemented(#fn);                         \\\n"
         "\t\treturn IP_CUDA_ERROR_NOT_SUPPORTED;            \\\n"
         "\t}\n\n"]
    for n in names:
        o.append("IP_STUB(%s)\n" % n)
    o.append("\nconst struct ip_entry ip_entries[] = {\n")
    for n in names:
        o.append("\t{\"%s\", (void *)%s},\n" % (n, n))
    o.append("};\n\nconst unsigned ip_entry_count = %d;\n" % len(names))
    write(os.path.join(args.outdir, "entries_gen.c"), "".join(o))

    # ---- procaddr_gen.c ------------------------------------------------------------------
    o = [banner("The version table behind cuGetProcAddress: for every API name in\n"
                " * the typedefs headers, each version (1000*major + 10*minor) at which a new symbol took\n"
                " * over, and that symbol as an index into ip_entries[]. Rows with ptds = 1 are the\n"
                " * per-thread-default-stream variants (_ptsz/_ptds). See gen_entries.py for the\n"
                " * mapping rule and procaddr.c for how it is searched.",
                sources),
         "#define IP_ENTRIES_NO_CUDA_H\n#include \"ip_entries.h\"\n\n",
         "const int ip_proc_header_version = %d;\n\n" % cuda_version,
         "const struct ip_proc_ver ip_proc_vers[] = {\n"]
    starts = {}
    pos = 0
    for name in sorted(table):
        starts[name] = pos
        for ver, sym, ptds in table[name]:
            o.append("\t{%d, %d, %d}, /* %s -> %s */\n" % (ver, index[sym], ptds, name, sym))
            pos += 1
    o.append("};\n\nconst struct ip_proc_api ip_proc_apis[] = {\n")
    for name in sorted(table):
        o.append("\t{\"%s\", %d, %d},\n" % (name, starts[name], len(table[name])))
    o.append("};\n\nconst unsigned ip_proc_api_count = %d;\n" % len(table))
    o.append("const unsigned ip_proc_ver_count = %d;\n" % pos)
    write(os.path.join(args.outdir, "procaddr_gen.c"), "".join(o))

    # ---- exports.map ---------------------------------------------------------------------
    o = ["/* GENERATED by interposer/gen/gen_entries.py from %s -- do not edit.\n"
         " * Exactly the driver symbols they declare; everything else stays local. */\n"
         % ", ".join(decl_headers),
         "{\n\tglobal:\n"]
    for n in names:
        o.append("\t\t%s;\n" % n)
    o.append("\tlocal:\n\t\t*;\n};\n")
    write(os.path.join(args.outdir, "exports.map"), "".join(o))

    # ---- errors_gen.c --------------------------------------------------------------------
    known = set(e[0] for e in errors)
    for k in DRIVER_STRINGS:
        if k not in known:
            die("DRIVER_STRINGS names %s, which is not in cuda.h's CUresult" % k)
    o = [banner("ip_error_name() and ip_error_string() for every CUresult of cuda.h. Names are\n"
                " * the enum identifiers; strings are the driver's own for the common codes\n"
                " * (gen_entries.py DRIVER_STRINGS) and otherwise the first sentence of the\n"
                " * code's documentation in cuda.h.", "cuda.h"),
         "#include <stddef.h>\n\n#include <cuda.h>\n\n#include \"ip_entries.h\"\n\n",
         "const char *ip_error_name(CUresult err)\n{\n\tswitch (err) {\n"]
    seen = set()
    uniq = []
    for name, val, doc in errors:
        if val in seen:
            continue        # an alias of an earlier code: the first name wins
        seen.add(val)
        uniq.append((name, val, doc))
    for name, val, doc in uniq:
        o.append("\tcase %s:\n\t\treturn \"%s\";\n" % (name, name))
    o.append("\tdefault:\n\t\treturn NULL;\n\t}\n}\n\n")
    o.append("const char *ip_error_string(CUresult err)\n{\n\tswitch (err) {\n")
    for name, val, doc in uniq:
        s = DRIVER_STRINGS.get(name) or first_sentence(doc) or name
        o.append("\tcase %s:\n\t\treturn %s;\n" % (name, c_string(s)))
    o.append("\tdefault:\n\t\treturn NULL;\n\t}\n}\n")
    write(os.path.join(args.outdir, "errors_gen.c"), "".join(o))

    # ---- procaddr_queries.txt ------------------------------------------------------------
    o = ["# GENERATED by interposer/gen/gen_entries.py from %s -- do not edit.\n"
         % ", ".join(td_headers),
         "# name version flags, one query per line, for tests/gpu/procaddr_dump.c and\n",
         "# procaddr_selfdump; '\"\"' is the empty name; a fourth field v1 asks the\n",
         "# 4-argument cuGetProcAddress instead of cuGetProcAddress_v2.\n"]
    lines = []
    for name in sorted(table):
        vers = sorted(set([v for v, _, _ in table[name]] + list(EXTRA_QUERY_VERSIONS)))
        lines.append("%s %d 0" % (name, vers[0] - 10))     # not sufficient yet
        for v in vers:
            for flags in (0, 2):
                lines.append("%s %d %d" % (name, v, flags))
    lines += [" ".join(str(x) for x in q) for q in SPECIAL_QUERIES]
    seen_q = set()
    for line in lines:
        if line not in seen_q:
            seen_q.add(line)
            o.append(line + "\n")
    write(os.path.join(args.outdir, "procaddr_queries.txt"), "".join(o))

    print("gen_entries: %d symbols, %d API names, %d (name, version) pairs "
          "(%d plain, %d per-thread), %d override(s), %d CUresult codes; CUDA_VERSION %d"
          % (len(names), len(table), n_pairs, n_plain, n_pairs - n_plain, len(OVERRIDES),
             len(uniq), cuda_version))
    print("gen_entries: symbols by header: %s; API names by header: %s"
          % (", ".join("%s %d" % (h, len(n)) for h, n in decl_per),
             ", ".join("%s %d" % (h, len(n)) for h, n in td_per)))
    if unserved:
        print("gen_entries: exported but served by no (name, version): %s"
              % ", ".join(unserved))
    return 0


if __name__ == "__main__":
    sys.exit(main())
