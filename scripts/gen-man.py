#!/usr/bin/env python3
"""Writes fastclock's man pages from their one source each, so they never
disagree with it:

  gen-man.py cli FASTCLOCK OUT      fastclock(1) from the built command's own
                                    --help, `<command> --help` and --version
  gen-man.py lib SRC_DIR OUT        libfastclock(3) from include/fastclock.h and
                                    include/fastclock_inline.h (declarations
                                    and their comments), checked against the
                                    export list cmake/libfastclock.map

Fails (exit 1, saying why) when the source cannot be read as expected: an
undocumented declaration, a name exported but not declared, a help text
whose layout changed.  The date is SOURCE_DATE_EPOCH's when set, so builds
are reproducible."""
import os
import re
import subprocess
import sys
import time


def die(msg):
    sys.stderr.write("gen-man: %s\n" % msg)
    sys.exit(1)


def date():
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))
    return time.strftime("%Y-%m-%d", time.gmtime(epoch))


def esc(text):
    """Plain text for roff: backslashes, and a leading . or ' taken literally."""
    text = text.replace("\\", "\\e")
    if text.startswith(".") or text.startswith("'"):
        text = "\\&" + text
    return text


def opt(text):
    """An option spec: hyphens are minus signs (so they can be copied)."""
    return esc(text).replace("-", "\\-")


# ---------------------------------------------------------------- fastclock(1)

def run_help(fastclock, *args):
    p = subprocess.run([fastclock, *args], capture_output=True, text=True)
    if p.returncode != 0:
        die("%s %s exited %d: %s" % (fastclock, " ".join(args), p.returncode, p.stderr.strip()))
    return p.stdout


ARG_RE = re.compile(r"^([A-Z][A-Z0-9_]*|\S*\|\S*|\[.*\])$")


def split_option(line):
    """'  --seconds S     time for ...' -> ('--seconds S', 'time for ...')."""
    words = line.strip().split(" ")
    spec = []
    i = 0
    while i < len(words):
        w = words[i]
        if w == "":
            break  # two spaces: the description starts
        if not spec or w.startswith("-") or spec[-1].endswith(",") or ARG_RE.match(w):
            spec.append(w)
            i += 1
        else:
            break
    return " ".join(spec), " ".join(x for x in words[i:] if x)


def help_blocks(text):
    """Blocks separated by blank lines, as lists of lines."""
    blocks, cur = [], []
    for line in text.rstrip("\n").split("\n"):
        if line.strip():
            cur.append(line.rstrip())
        elif cur:
            blocks.append(cur)
            cur = []
    if cur:
        blocks.append(cur)
    return blocks


def options_to_roff(lines):
    """Indented '  -x, --long ARG   text' lines (with deeper continuation lines)."""
    out = []
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped.startswith("-") and indent <= 4:
            spec, desc = split_option(line)
            out += [".TP", ".B " + opt(spec)]
            if desc:
                out.append(esc(desc))
        else:
            if not out:
                die("help text: continuation line before any option: %r" % line)
            out.append(esc(stripped))
    return out


def subcommand(fastclock, name):
    text = run_help(fastclock, name, "--help")
    blocks = help_blocks(text)
    usage = blocks[0]
    if not usage[0].startswith("usage: fastclock " + name):
        die("'fastclock %s --help' does not start with its usage line" % name)
    synopsis = " ".join(l.strip() for l in usage)[len("usage: "):]
    body, exit_status, env = [], None, None
    for block in blocks[1:]:
        first = block[0]
        if first.startswith("exit status:"):
            exit_status = " ".join(l.strip() for l in block)[len("exit status:"):].strip()
        elif first.startswith("environment:"):
            env = " ".join(l.strip() for l in block)[len("environment:"):].strip()
        elif first.strip().startswith("-") or (first.endswith(":") and len(block) > 1
                                                and block[1].strip().startswith("-")):
            if first.endswith(":"):
                block = block[1:]
            body += options_to_roff(block)
        else:
            body += [".PP", esc(" ".join(l.strip() for l in block))]
    return synopsis, body, exit_status, env


def cli_page(fastclock):
    top = help_blocks(run_help(fastclock, "--help"))
    version = run_help(fastclock, "--version").strip()
    if not version.startswith("fastclock "):
        die("unexpected --version output %r" % version)
    cmds = []  # (name, summary)
    for block in top:
        if block[0] != "commands:":
            continue
        for line in block[1:]:
            if re.match(r"^  [a-z]+(\s|$)", line):
                # 'name [args]  summary', the summary after the last wide gap
                parts = re.split(r"\s{2,}", line.strip())
                summary = parts[-1] if len(parts) > 1 and parts[-1][0] not in "[-" else ""
                cmds.append([parts[0].split()[0], summary])
            elif line.startswith("      ") and cmds:
                cmds[-1][1] = (cmds[-1][1] + " " + line.strip()).strip()
            elif line.startswith("  fastclock"):
                continue  # the lines about --help and --version
            else:
                die("'fastclock --help': unexpected line in the command list: %r" % line)
        break
    if not cmds:
        die("'fastclock --help' lists no commands")

    out = ['.TH FASTCLOCK 1 "%s" "%s" "User Commands"' % (date(), esc(version)),
           ".SH NAME",
           "fastclock \\- " + esc(", ".join(c[1].split(",")[0] for c in cmds)),
           ".SH SYNOPSIS", ".nf"]
    subs = []
    for name, _ in cmds:
        synopsis, body, exit_status, env = subcommand(fastclock, name)
        subs.append((name, synopsis, body, exit_status, env))
        out.append(opt(synopsis).replace("fastclock \\-", "fastclock -", 0))
    out += ["fastclock \\-\\-help", "fastclock <command> \\-\\-help", "fastclock \\-\\-version", ".fi",
            ".SH DESCRIPTION",
            ".B fastclock",
            "reads the time the way libfastclock(3) does and explains what it costs on this machine."]
    for name, summary in cmds:
        out += [".TP", ".B " + name, esc(summary) + "."]
    out += [".SH COMMANDS"]
    for name, synopsis, body, _, _ in subs:
        out += [".SS " + name, ".B " + opt(synopsis)] + body
    out += [".SH EXIT STATUS"]
    for name, _, _, exit_status, _ in subs:
        if exit_status:
            out += [".TP", ".B " + name, esc(exit_status)]
    envs = [(name, env) for name, _, _, _, env in subs if env]
    if envs:
        out += [".SH ENVIRONMENT"]
        for name, env in envs:
            out += [".TP", ".B " + name, esc(env)]
        out += [".PP", "FASTCLOCK_MODE and FASTCLOCK_CALIBRATOR are the library's: see",
                ".BR libfastclock (3)."]
    out += [".SH SEE ALSO", ".BR libfastclock (3)"]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------ libfastclock(3)

def comment_text(raw):
    """The text of a /* ... */ comment, one string per line, margins removed."""
    body = raw[2:-2]
    lines = []
    for line in body.split("\n"):
        line = re.sub(r"^\s*\* ?", "", line) if line.strip().startswith("*") else line.strip()
        lines.append(line.rstrip())
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def prose_to_roff(lines):
    """Paragraphs; '- ' items become bullets; 'NAME=...' lines become tags."""
    out, para = [], []

    def flush():
        if para:
            out.extend([".PP", esc(" ".join(para))])
            para.clear()

    item = None
    for line in lines + [""]:
        s = line.strip()
        if not s:
            flush()
            item = None
            continue
        if s.startswith("- "):
            flush()
            out.extend([".IP \\(bu 2", esc(s[2:])])
            item = True
        elif item and line.startswith("    "):
            out.append(esc(s))
        else:
            if item:
                item = None
                out.append(".PP")
            para.append(s)
    flush()
    return out


def parse_header(path):
    """Top comment, then groups (comment lines, [declarations]) in order, and
    the fields of any struct as (declaration, comment)."""
    text = open(path).read()
    tokens = re.finditer(r"/\*.*?\*/|^[ \t]*#[^\n]*$|^[^\n]*$", text, re.S | re.M)
    top, groups, structs = None, [], {}
    pending, decls = None, []
    in_struct, field = None, None
    for t in tokens:
        s = t.group(0)
        if s.startswith("/*"):
            if in_struct is not None:
                if field is not None:
                    field[1].append(" ".join(comment_text(s)))
                continue
            if top is None:
                top = comment_text(s)
                continue
            if decls:
                groups.append((pending, decls))
                decls = []
            pending = comment_text(s)
            continue
        line = s.strip()
        if in_struct is not None:
            if line.startswith("};"):
                structs[in_struct] = [(d, " ".join(c)) for d, c in structs[in_struct]]
                in_struct, field = None, None
                continue
            m = re.match(r"^([^/;]+;)\s*(/\*.*?(\*/)?)?\s*$", line)
            if m:
                field = [m.group(1), []]
                c = m.group(2) or ""
                structs[in_struct].append(field)
                if c:
                    field[1].append(re.sub(r"^/\*\s*|\s*(\*/)?$", "", c))
            elif field is not None and line:
                field[1].append(re.sub(r"\s*\*/$", "", line))
            continue
        m = re.match(r"^struct (fastclock_\w+) \{$", line)
        if m:
            in_struct = m.group(1)
            structs[in_struct] = []
            if decls:
                groups.append((pending, decls))
                decls = []
            pending = None
            continue
        if not line or line.startswith("#") or line in ("}", "{"):
            if not line and decls:
                groups.append((pending, decls))
                decls, pending = [], None
            continue
        if "fastclock_" in line and (line.endswith(";") or line.endswith(")")) \
                and not line.startswith("return") and "__atomic" not in line and " = " not in line \
                and not re.search(r"fastclock_\w+_\s*\(", line):  # the header's own helpers
            decls.append(line.rstrip(";").strip())
    if decls:
        groups.append((pending, decls))
    return top, groups, structs


def decl_name(decl):
    m = re.search(r"(fastclock_\w+)\s*(\(|$)", decl)
    return m.group(1) if m else None


def lib_page(src):
    main = os.path.join(src, "include", "fastclock.h")
    inline = os.path.join(src, "include", "fastclock_inline.h")
    top, groups, structs = parse_header(main)
    itop, igroups, istructs = parse_header(inline)
    version = {}
    for k in ("MAJOR", "MINOR", "PATCH"):
        m = re.search(r"#define FASTCLOCK_VERSION_%s (\d+)" % k, open(main).read())
        if not m:
            die("no FASTCLOCK_VERSION_%s in %s" % (k, main))
        version[k] = m.group(1)
    ver = "%s.%s.%s" % (version["MAJOR"], version["MINOR"], version["PATCH"])

    # Description and environment from the top comment.
    if not top or top[0].split(" ")[0] != "fastclock":
        die("%s does not open with its description comment" % main)
    summary = top[0].split("\u2014", 1)[-1].split(" - ", 1)[-1].strip().rstrip(".")
    env_at = next((i for i, l in enumerate(top) if l.startswith("Environment")), None)
    if env_at is None:
        die("%s: no 'Environment' paragraph in its top comment" % main)
    description, env = top[1:env_at], top[env_at + 1:]

    documented = set()
    out = ['.TH LIBFASTCLOCK 3 "%s" "fastclock %s" "Library Functions Manual"' % (date(), ver),
           ".SH NAME", "libfastclock \\- " + esc(summary),
           ".SH LIBRARY", "fastclock (\\fIlibfastclock\\fP, \\fI\\-lfastclock\\fP;"
           " \\fIpkg\\-config \\-\\-cflags \\-\\-libs fastclock\\fP;"
           " CMake \\fIfind_package(fastclock)\\fP)",
           ".SH SYNOPSIS", ".nf", ".B #include <fastclock.h>", ".PP"]
    for _, decls in groups:
        for d in decls:
            out.append(esc(d) + ";")
    out += [".PP", ".B #include <fastclock_inline.h>", ".PP"]
    for _, decls in igroups:
        for d in decls:
            out.append(esc(d) + ";")
    out += [".fi", ".SH DESCRIPTION"] + prose_to_roff(description)
    out += [".SH FUNCTIONS"]
    for comment, decls in groups:
        names = [decl_name(d) for d in decls]
        if not comment:
            die("%s: no comment documents %s" % (main, ", ".join(n for n in names if n)))
        documented.update(n for n in names if n)
        out.append(".TP")
        out.append("\\fB" + "\\fP\n.TQ\n\\fB".join(esc(d) for d in decls) + "\\fP")
        out += [esc(" ".join(l.strip() for l in comment if l.strip()))]
    for sname, fields in structs.items():
        out += [".SH STRUCT %s" % sname.upper().replace("_", "\\_"),
                "Filled by \\fBfastclock_status\\fP(); fields are only ever added at the end."]
        for decl, c in fields:
            if not c and re.search(r"\breserved\b", decl):
                c = "Reserved for later fields."
            if not c:
                die("%s: field '%s' of struct %s has no comment" % (main, decl, sname))
            out += [".TP", ".B " + esc(decl.rstrip(";")), esc(c)]
    if not itop or not itop[0].startswith("fastclock_inline.h: "):
        die("%s does not open with its description comment" % inline)
    first = itop[0][len("fastclock_inline.h: "):]
    out += [".SH INLINE CLOCKS"] + prose_to_roff([first[0].upper() + first[1:]] + itop[1:])
    for comment, decls in igroups:
        for d in decls:
            n = decl_name(d)
            if n:
                documented.add(n)
        out += [".TP", "\\fB" + "\\fP\n.TQ\n\\fB".join(esc(d) for d in decls) + "\\fP"]
        if comment:
            out.append(esc(" ".join(l.strip() for l in comment if l.strip())))
    out += [".SH ENVIRONMENT"]
    for line in env:
        m = re.match(r"^\s*(\w+)=(\S+)\s*(.*)$", line)
        if m:
            out += [".TP", ".B %s=%s" % (m.group(1), esc(m.group(2)))]
            if m.group(3):
                out.append(esc(m.group(3)))
        elif line.strip():
            out.append(esc(line.strip()))
    out += [".PP", "Read with \\fBsecure_getenv\\fP(3): set\\-user\\-ID programs ignore them."]
    out += [".SH SEE ALSO", ".BR fastclock (1),", ".BR clock_gettime (2),", ".BR gettimeofday (2)"]

    # The export list and the page must name the same functions and data.
    mapfile = os.path.join(src, "cmake", "libfastclock.map")
    exported = set(re.findall(r"^\s*(fastclock_\w+);", open(mapfile).read(), re.M))
    declared = {n for n in documented if not n.endswith("_inline")}
    if exported != declared:
        die("cmake/libfastclock.map and the headers disagree: exported only %s; declared only %s"
            % (sorted(exported - declared), sorted(declared - exported)))
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("cli", "lib"):
        die("usage: gen-man.py cli FASTCLOCK OUT | lib SRC_DIR OUT")
    page = cli_page(sys.argv[2]) if sys.argv[1] == "cli" else lib_page(sys.argv[2])
    tmp = sys.argv[3] + ".tmp"
    with open(tmp, "w") as f:
        f.write(page)
    os.replace(tmp, sys.argv[3])


if __name__ == "__main__":
    main()
