#!/usr/bin/env python3
"""Generate a protocol's message-type code from its table file (proto/messages.tbl).

One table per protocol declares every message type once: its number, direction, bodies, call
class, payload limits, capability bit, server handler and state-log effect (the table's header
comment describes the syntax). This generator checks the table and writes, into OUTDIR:

  PREFIX_msgs.h   enum PREFIX_msg (PREFIX_MSG_<NAME> = number), enum PREFIX_cap
                  (PREFIX_CAP_<NAME> = bit), PREFIX_CAPS_SERVER and PREFIX_CAPS_CLIENT, and the
                  declarations of the two below
  PREFIX_msgs.c   the frame checker's table (const struct rgpu_msg_table FRAME_TABLE, see
                  transport/include/rgpu/frame.h), PREFIX_msg_info(type) (struct rgpu_msg_info,
                  proto/include/rgpu/msgdef.h) and PREFIX_msg_name(type)
  HANDLERS.h/.c   with --handlers: the server's dispatch array HANDLERS[type] and a prototype
                  for every handler the table names (the signature comes from --handler-args)
  RECORDER.h/.c   with --recorder: the state-log recorder RECORDER_build(type, req, rep, ops),
                  which hands every message whose effect is create, destroy or attr to its
                  builder PREFIX_rec_<name>() (written by hand, proto/record.c: typed with the
                  row's body and reply) after checking the body's type; a missing builder is
                  a link error, so a new row cannot be left unrecorded

The words a table may use are read from the C headers given with --enums, so the table and the
code it is compiled against cannot disagree: directions from enum rgpu_msg_dir (RGPU_DIR_*),
classes from enum rgpu_msg_class (RGPU_CLASS_*), effects from enum rgpu_msg_effect
(RGPU_EFFECT_*), object kinds from enum st_kind (ST_KIND_*), payload limits from the
RGPU_MAX_* macros. Body and reply types must be messages of the --proto file.

Every problem is reported as FILE:LINE: ROW: what is wrong, and the generator exits 1 without
writing anything; the build then stops. Outputs whose content did not change are not
rewritten, so editing a comment in the table recompiles nothing.

Usage: gen_msgs.py TABLE PREFIX --outdir DIR --proto FILE.proto --enums HEADER...
                   [--frame-table NAME] [--handlers NAME --handler-args 'C PARAMETERS']
                   [--recorder NAME]
Python 3 standard library only.
"""

import argparse
import os
import re
import sys

# The words of each column and the C enum (and constant prefix) they come from.
VOCABULARIES = {
    "dir": ("rgpu_msg_dir", "RGPU_DIR_"),
    "class": ("rgpu_msg_class", "RGPU_CLASS_"),
    "effect": ("rgpu_msg_effect", "RGPU_EFFECT_"),
    "kind": ("st_kind", "ST_KIND_"),
}
# ST_KIND_TOMBSTONE marks a removed id in state-log streams; it is not an object kind.
NOT_KINDS = {"TOMBSTONE"}

REQUIRED = ("number", "dir", "body", "reply", "class", "cap", "handler", "effect")
OPTIONAL = ("payload", "reply_payload")
NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_TYPE = 0xFFFF  # the frame header's type field is 16 bits


class TableError(Exception):
    pass


class Problems:
    """Collects every problem so one run names all of them."""

    def __init__(self, path):
        self.path = path
        self.items = []

    def add(self, line, row, text):
        where = "%s:%d" % (self.path, line) if line else self.path
        self.items.append("%s: %s: %s" % (where, row, text) if row else "%s: %s" % (where, text))


# ---- reading the C headers and the .proto ---------------------------------------------------


def strip_c_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def read_c_vocabulary(headers):
    """enum name -> [member names], and the set of RGPU_MAX_* macros, from the headers."""
    enums, limits = {}, set()
    for path in headers:
        with open(path) as f:
            text = strip_c_comments(f.read())
        for m in re.finditer(r"\benum\s+(\w+)\s*\{(.*?)\}", text, re.S):
            members = []
            for item in m.group(2).split(","):
                item = item.strip()
                if item:
                    members.append(item.split("=")[0].strip())
            enums[m.group(1)] = members
        limits.update(re.findall(r"^\s*#\s*define\s+(RGPU_MAX_\w+)\b", text, re.M))
    return enums, limits


def words_of(enums, column):
    enum, prefix = VOCABULARIES[column]
    if enum not in enums:
        raise TableError("enum %s (the words of `%s`) is in none of the --enums headers"
                         % (enum, column))
    words = {}
    for member in enums[enum]:
        if member.startswith(prefix):
            word = member[len(prefix):]
            if column == "kind":
                if word not in NOT_KINDS:
                    words[word] = member
            else:
                words[word.lower()] = member
    return words


def read_proto(path):
    """(package, set of top-level message names) of a .proto file."""
    with open(path) as f:
        text = re.sub(r"//[^\n]*", "", f.read())
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    m = re.search(r"^\s*package\s+([\w.]+)\s*;", text, re.M)
    package = m.group(1) if m else ""
    messages, depth = set(), 0
    for tok in re.finditer(r"\bmessage\s+(\w+)\s*\{|\{|\}", text):
        if tok.group(1):
            if depth == 0:
                messages.add(tok.group(1))
            depth += 1
        elif tok.group(0) == "{":
            depth += 1
        else:
            depth -= 1
    return package, messages


def camel_to_lower(name):
    """protoc-c's spelling of a message name in C identifiers (ModuleLoadReply ->
    module_load_reply): an underscore before each run of capitals but the first."""
    out, was_upper = [], True
    for ch in name:
        up = ch.isupper()
        if up and not was_upper:
            out.append("_")
        out.append(ch.lower() if up else ch)
        was_upper = up
    return "".join(out)


def descriptor(package, message):
    parts = [p.lower() for p in package.split(".") if p] + [camel_to_lower(message)]
    return "&%s__descriptor" % "__".join(parts)


# ---- reading the table ----------------------------------------------------------------------


def parse_table(path, problems):
    """([(line, name, bit, comment)], [(line, name, {key: value})]) of a table file."""
    caps, msgs = [], []
    with open(path) as f:
        lines = f.read().split("\n")
    for lineno, raw in enumerate(lines, 1):
        text, _, comment = raw.partition("#")
        fields = text.split()
        if not fields:
            continue
        if fields[0] == "capability":
            if len(fields) != 3 or not fields[2].startswith("bit="):
                problems.add(lineno, None, "a capability row is `capability NAME bit=VALUE`")
                continue
            caps.append((lineno, fields[1], fields[2][4:], comment.strip()))
            continue
        name, cols = fields[0], {}
        for field in fields[1:]:
            key, eq, value = field.partition("=")
            if not eq or not key or not value:
                problems.add(lineno, name, "`%s` is not key=value" % field)
            elif key in cols:
                problems.add(lineno, name, "`%s` given twice" % key)
            else:
                cols[key] = value
        msgs.append((lineno, name, cols))
    return caps, msgs


def check_caps(caps, problems):
    """name -> bit of the declared capabilities."""
    declared, bits = {}, {}
    for lineno, name, bit, _ in caps:
        if not NAME_RE.match(name):
            problems.add(lineno, name, "a capability name is upper case: [A-Z][A-Z0-9_]*")
            continue
        if name in declared or name == "BASE":
            problems.add(lineno, name, "capability declared twice (or named BASE)")
            continue
        try:
            value = int(bit, 0)
        except ValueError:
            value = 0
        if value <= 0 or value & (value - 1) or value >= 1 << 32:
            problems.add(lineno, name, "bit=%s is not a power of two below 2^32" % bit)
            continue
        if value in bits:
            problems.add(lineno, name, "bit %d is already %s" % (value, bits[value]))
            continue
        declared[name] = value
        bits[value] = name
    return declared


def check_msgs(msgs, caps, vocab, limits, proto_messages, problems):
    """The rows that passed every check, each a dict of cleaned columns."""
    rows, names, numbers = [], {}, {}
    for lineno, name, cols in msgs:
        bad = len(problems.items)

        def fail(text):
            problems.add(lineno, name, text)

        if not NAME_RE.match(name):
            fail("a message name is upper case: [A-Z][A-Z0-9_]*")
        elif name in names:
            fail("name already used on line %d" % names[name])
        else:
            names[name] = lineno
        for key in REQUIRED:
            if key not in cols:
                fail("no %s= (every message row needs it)" % key)
        for key in cols:
            if key not in REQUIRED and key not in OPTIONAL:
                fail("unknown key `%s`" % key)
        if len(problems.items) != bad:
            continue

        row = {"line": lineno, "name": name}
        try:
            number = int(cols["number"], 10)
        except ValueError:
            number = -1
        if not 1 <= number <= MAX_TYPE:
            fail("number=%s is not 1..%d" % (cols["number"], MAX_TYPE))
        elif number in numbers:
            fail("number %d is already %s" % (number, numbers[number]))
        else:
            numbers[number] = name
        row["number"] = number

        for column in ("dir", "class"):
            if cols[column] not in vocab[column]:
                fail("unknown %s `%s` (one of: %s)"
                     % (column, cols[column], ", ".join(sorted(vocab[column]))))
            row[column] = cols[column]

        effect, _, kind = cols["effect"].partition(":")
        if effect not in vocab["effect"]:
            fail("unknown effect `%s` (one of: %s)"
                 % (effect, ", ".join(sorted(vocab["effect"]))))
        elif effect in ("create", "destroy", "attr"):
            if not kind:
                fail("effect=%s needs a kind: %s:KIND" % (effect, effect))
            elif kind not in vocab["kind"]:
                fail("unknown kind `%s` in effect=%s (one of: %s)"
                     % (kind, cols["effect"], ", ".join(sorted(vocab["kind"]))))
        elif kind:
            fail("effect=%s takes no kind" % effect)
        row["effect"], row["kind"] = effect, kind

        for column, none_word in (("body", "empty"), ("reply", "none")):
            value = cols[column]
            if value != none_word and value not in proto_messages:
                fail("%s=%s is neither `%s` nor a message of the .proto"
                     % (column, value, none_word))
            row[column] = None if value == none_word else value

        for column in OPTIONAL:
            value = cols.get(column, "0")
            if value != "0" and value not in limits:
                fail("%s=%s is neither 0 nor a limit of the headers (%s)"
                     % (column, value, ", ".join(sorted(limits))))
            row[column] = value

        cap = cols["cap"]
        if cap != "base" and cap not in caps:
            fail("cap=%s is neither `base` nor a declared capability" % cap)
        row["cap"] = None if cap == "base" else cap

        handler = cols["handler"]
        row["handler"] = handler
        if handler not in ("-", "reader") and not IDENT_RE.match(handler):
            fail("handler=%s is not a C identifier, `reader` or `-`" % handler)

        # rules between columns
        d, c, reply = row["dir"], row["class"], row["reply"]
        if d == "to_client":
            if handler != "-":
                fail("a to_client message has no server handler: handler=-")
            if c != "push":
                fail("a to_client message is class push")
        elif handler == "-" and c != "session":
            fail("no handler: a message the server receives needs handler=NAME (or "
                 "`reader`); `-` is only for to_client messages and class session")
        if c == "push" and d != "to_client":
            fail("class push is for to_client messages only")
        if c in ("call", "post_or_call") and reply is None:
            fail("class %s waits for a reply: reply=MESSAGE" % c)
        if c in ("post", "push") and reply is not None:
            fail("class %s is never answered: reply=none" % c)
        if d == "to_client" and row["reply_payload"] != "0":
            fail("a to_client message is never answered: no reply_payload")

        if len(problems.items) == bad:
            rows.append(row)
    return rows


# ---- writing --------------------------------------------------------------------------------


def banner(table):
    return ("/* Generated by proto/gen_msgs.py from %s. Do not edit: change the table. */\n"
            % os.path.basename(table))


def c_comment(text):
    """text made safe inside a C comment"""
    return text.replace("*/", "* /").replace("/*", "/ *")


def caps_expr(prefix, caps, names):
    if not names:
        return "0"
    bits = ["%s_CAP_%s" % (prefix.upper(), n) for n in sorted(names, key=lambda n: caps[n])]
    return "(" + " | \\\n\t".join(bits) + ")"


def gen_header(args, caps, cap_comments, rows):
    P, p = args.prefix.upper(), args.prefix
    guard = "%s_MSGS_H" % P
    out = [banner(args.table), "#ifndef %s\n#define %s\n\n" % (guard, guard),
           '#include "rgpu/frame.h"\n#include "rgpu/msgdef.h"\n\n']
    out.append("/* Message types: the frame header's `type`. Never renumbered or reused. */\n")
    out.append("enum %s_msg {\n" % p)
    for r in sorted(rows, key=lambda r: r["number"]):
        out.append("\t%s_MSG_%s = %d,\n" % (P, r["name"], r["number"]))
    out.append("};\n\n")
    if caps:  # a protocol without capability rows (the admin one) has no enum: C forbids empty ones
        out.append("/* Capability bits exchanged in the handshake. */\n")
        out.append("enum %s_cap {\n" % p)
        for name in sorted(caps, key=lambda n: caps[n]):
            note = " /* %s */" % c_comment(cap_comments[name]) if cap_comments.get(name) else ""
            out.append("\t%s_CAP_%s = %d,%s\n" % (P, name, caps[name], note))
        out.append("};\n\n")
    server = {r["cap"] for r in rows if r["cap"] and
              (r["handler"] != "-" or r["dir"] != "to_server")}
    client = {r["cap"] for r in rows if r["cap"] and r["dir"] != "to_client"}
    out.append("/* The capabilities of every message the server handles or sends. */\n")
    out.append("#define %s_CAPS_SERVER %s\n" % (P, caps_expr(p, caps, server)))
    out.append("/* The capabilities of every message the client sends: what it needs a server "
               "to have. */\n")
    out.append("#define %s_CAPS_CLIENT %s\n\n" % (P, caps_expr(p, caps, client)))
    out.append("/* The frame checker's rules for this protocol (rgpu_conn_set_msgs()). */\n")
    out.append("extern const struct rgpu_msg_table %s;\n\n" % args.frame_table)
    out.append("/* %s_msg_info() - what the table says about type, or NULL if it has no such "
               "type. */\n" % p)
    out.append("const struct rgpu_msg_info *%s_msg_info(unsigned type);\n\n" % p)
    out.append('/* %s_msg_name() - the type\'s name for logs ("MSG_LAUNCH"), or "MSG_?". */\n'
               % p)
    out.append("const char *%s_msg_name(unsigned type);\n\n" % p)
    out.append("#endif\n")
    return "".join(out)


def gen_source(args, package, rows):
    P, p = args.prefix.upper(), args.prefix
    pb_headers = "".join('#include "%s.pb-c.h"\n' % os.path.splitext(os.path.basename(p))[0]
                         for p in args.proto)
    out = [banner(args.table), "#include <stddef.h>\n\n",
           '%s#include "rgpu/statetrack.h"\n#include "%s_msgs.h"\n\n'
           % (pb_headers, p)]
    by_number = sorted(rows, key=lambda r: r["number"])
    out.append("static const struct rgpu_msg_rule rules[] = {\n")
    for r in by_number:
        out.append('\t[%s_MSG_%s] = {"MSG_%s", RGPU_DIR_%s, %d, %s, %s},\n'
                   % (P, r["name"], r["name"], r["dir"].upper(), r["body"] is None,
                      r["payload"], r["reply_payload"]))
    out.append("};\n\n")
    out.append("const struct rgpu_msg_table %s = {rules, sizeof(rules) / sizeof(rules[0])};\n\n"
               % args.frame_table)
    out.append("static const struct rgpu_msg_info infos[] = {\n")
    for r in by_number:
        t = "%s_MSG_%s" % (P, r["name"])
        out.append("\t[%s] = {\n" % t)
        out.append('\t\t.name = "MSG_%s",\n' % r["name"])
        out.append("\t\t.type = %s,\n" % t)
        out.append("\t\t.call_class = RGPU_CLASS_%s,\n" % r["class"].upper())
        out.append("\t\t.effect = RGPU_EFFECT_%s,\n" % r["effect"].upper())
        out.append("\t\t.kind = %s,\n" % ("ST_KIND_" + r["kind"] if r["kind"] else "0"))
        out.append("\t\t.cap = %s,\n" % ("%s_CAP_%s" % (P, r["cap"]) if r["cap"] else "0"))
        out.append("\t\t.body = %s,\n" % (descriptor(package, r["body"]) if r["body"] else "NULL"))
        out.append("\t\t.reply = %s,\n"
                   % (descriptor(package, r["reply"]) if r["reply"] else "NULL"))
        out.append("\t\t.rule = &rules[%s],\n" % t)
        out.append("\t},\n")
    out.append("};\n\n")
    out.append("const struct rgpu_msg_info *%s_msg_info(unsigned type)\n{\n" % p)
    out.append("\tif (type < sizeof(infos) / sizeof(infos[0]) && infos[type].name)\n")
    out.append("\t\treturn &infos[type];\n\treturn NULL;\n}\n\n")
    out.append("const char *%s_msg_name(unsigned type)\n{\n" % p)
    out.append("\treturn rgpu_msg_table_name(&%s, type);\n}\n" % args.frame_table)
    return "".join(out)


def gen_handlers(args, rows):
    P, p, h = args.prefix.upper(), args.prefix, args.handlers
    size = max(r["number"] for r in rows) + 1
    params = args.handler_args
    structs = sorted(set(re.findall(r"\bstruct\s+(\w+)", params)))
    guard = "%s_H" % h.upper()
    named = [r for r in rows if r["handler"] not in ("-", "reader")]
    hdr = [banner(args.table), "#ifndef %s\n#define %s\n\n" % (guard, guard)]
    hdr.extend("struct %s;\n" % s for s in structs)
    hdr.append("\n/* Every handler the table names (several types may share one). */\n")
    for fn in sorted({r["handler"] for r in named}):
        hdr.append("int %s(%s);\n" % (fn, params))
    hdr.append("\n/*\n * %s[type] - the handler of a request type; NULL where the table names "
               "none\n * (handler=- or handler=reader): such a frame never reaches the executor."
               "\n */\n" % h)
    hdr.append("extern int (*const %s[%d])(%s);\n\n#endif\n" % (h, size, params))
    src = [banner(args.table), "#include <stddef.h>\n\n",
           '#include "%s_msgs.h"\n#include "%s.h"\n\n' % (p, h)]
    src.append("int (*const %s[%d])(%s) = {\n" % (h, size, params))
    for r in sorted(named, key=lambda r: r["number"]):
        src.append("\t[%s_MSG_%s] = %s,\n" % (P, r["name"], r["handler"]))
    src.append("};\n")
    return "".join(hdr), "".join(src)


def c_type(package, message):
    parts = [p.capitalize() for p in package.split(".") if p]
    return "__".join(parts + [message])


def gen_recorder(args, package, rows):
    """The recorder: one builder per row that changes the state log."""
    P, p, rec = args.prefix.upper(), args.prefix, args.recorder
    guard = "%s_GEN_H" % rec.upper()
    rows = [r for r in sorted(rows, key=lambda r: r["number"])
            if r["effect"] in ("create", "destroy", "attr")]
    hdr = [banner(args.table), "#ifndef %s\n#define %s\n\n" % (guard, guard),
           "#include <stdint.h>\n\n#include <protobuf-c/protobuf-c.h>\n\n",
           '#include "rgpu/record.h"\n']
    hdr.extend('#include "%s.pb-c.h"\n' % os.path.splitext(os.path.basename(f))[0]
               for f in args.proto)
    hdr.append("\n/*\n * The builders (proto/record.c), one per row whose effect is create, "
               "destroy or attr.\n * A builder with a reply is called with rep NULL when "
               "the request is sent, and\n * with the reply once it is known.\n */\n")
    for r in rows:
        params = "const %s *req" % c_type(package, r["body"]) if r["body"] else "void"
        if r["reply"]:
            params += ", const %s *rep" % c_type(package, r["reply"])
        hdr.append("int %s_rec_%s(%s, struct rgpu_rec_ops *ops); /* %s:%s */\n"
                   % (p, r["name"].lower(), params, r["effect"], r["kind"]))
    hdr.append("\n/*\n * %s_build() - the state-log operations of one message: ops->n = 0 "
               "for a\n * message that changes nothing. req is the decoded request body, rep "
               "the decoded\n * reply or NULL. Returns 0, RGPU_EINVAL (a body of the wrong "
               "type) or the builder's error.\n */\n" % rec)
    hdr.append("int %s_build(unsigned type, const ProtobufCMessage *req, "
               "const ProtobufCMessage *rep,\n\t\tstruct rgpu_rec_ops *ops);\n\n#endif\n"
               % rec)
    src = [banner(args.table), "#include <stddef.h>\n\n", '#include "rgpu/err.h"\n',
           '#include "%s_msgs.h"\n#include "%s.h"\n\n' % (p, rec)]
    src.append("int %s_build(unsigned type, const ProtobufCMessage *req, "
               "const ProtobufCMessage *rep,\n\t\tstruct rgpu_rec_ops *ops)\n{\n" % rec)
    src.append("\tops->n = 0;\n\tswitch (type) {\n")
    for r in rows:
        src.append("\tcase %s_MSG_%s:\n" % (P, r["name"]))
        src.append("\t\tif (!req || req->descriptor != %s)\n\t\t\treturn RGPU_EINVAL;\n"
                   % descriptor(package, r["body"]))
        args_c = "(const %s *)req" % c_type(package, r["body"])
        if r["reply"]:
            src.append("\t\tif (rep && rep->descriptor != %s)\n\t\t\treturn RGPU_EINVAL;\n"
                       % descriptor(package, r["reply"]))
            args_c += ", (const %s *)rep" % c_type(package, r["reply"])
        src.append("\t\treturn %s_rec_%s(%s, ops);\n" % (p, r["name"].lower(), args_c))
    src.append("\tdefault:\n\t\treturn 0;\n\t}\n}\n")
    return "".join(hdr), "".join(src)


def write_if_changed(path, text):
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except OSError:
        pass
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("table", help="the protocol's table file (proto/messages.tbl)")
    ap.add_argument("prefix", help="C prefix of the generated names (rgpu -> rgpu_msgs.h, "
                    "RGPU_MSG_*, rgpu_msg_info)")
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--proto", nargs="+", required=True,
                    help="the .proto files of the bodies (one package)")
    ap.add_argument("--enums", nargs="+", required=True,
                    help="C headers with enum rgpu_msg_dir, rgpu_msg_class, rgpu_msg_effect, "
                    "st_kind and the RGPU_MAX_* limits")
    ap.add_argument("--frame-table", help="name of the struct rgpu_msg_table "
                    "(default PREFIX_msgs)")
    ap.add_argument("--handlers", help="also write HANDLERS.h/.c: the server's dispatch array")
    ap.add_argument("--handler-args", default="void *ctx",
                    help="the handlers' C parameter list")
    ap.add_argument("--recorder", help="also write RECORDER.h/.c: the state-log recorder")
    args = ap.parse_args()
    if not IDENT_RE.match(args.prefix):
        ap.error("prefix must be a C identifier")
    args.frame_table = args.frame_table or args.prefix + "_msgs"

    problems = Problems(args.table)
    try:
        enums, limits = read_c_vocabulary(args.enums)
        vocab = {column: words_of(enums, column) for column in VOCABULARIES}
        package, proto_messages = None, set()
        for path in args.proto:
            pkg, msgs = read_proto(path)
            if package is not None and pkg != package:
                raise TableError("%s is package %s, not %s" % (path, pkg, package))
            package = pkg
            proto_messages |= msgs
        caps_rows, msg_rows = parse_table(args.table, problems)
    except (OSError, TableError) as e:
        sys.stderr.write("gen_msgs: %s\n" % e)
        return 1
    caps = check_caps(caps_rows, problems)
    rows = check_msgs(msg_rows, caps, vocab, limits, proto_messages, problems)
    if not msg_rows:
        problems.add(0, None, "no message rows")
    if problems.items:
        for text in problems.items:
            sys.stderr.write("gen_msgs: %s\n" % text)
        sys.stderr.write("gen_msgs: %d problem(s); nothing written\n" % len(problems.items))
        return 1

    cap_comments = {name: comment for _, name, _, comment in caps_rows}
    os.makedirs(args.outdir, exist_ok=True)
    write_if_changed(os.path.join(args.outdir, args.prefix + "_msgs.h"),
                     gen_header(args, caps, cap_comments, rows))
    write_if_changed(os.path.join(args.outdir, args.prefix + "_msgs.c"),
                     gen_source(args, package, rows))
    if args.handlers:
        hdr, src = gen_handlers(args, rows)
        write_if_changed(os.path.join(args.outdir, args.handlers + ".h"), hdr)
        write_if_changed(os.path.join(args.outdir, args.handlers + ".c"), src)
    if args.recorder:
        hdr, src = gen_recorder(args, package, rows)
        write_if_changed(os.path.join(args.outdir, args.recorder + ".h"), hdr)
        write_if_changed(os.path.join(args.outdir, args.recorder + ".c"), src)
    return 0


if __name__ == "__main__":
    sys.exit(main())
