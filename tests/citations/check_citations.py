#!/usr/bin/env python3
"""Every citation in the tracked files resolves from the checkout.

A citation is a reference to a document: a `*.md` path followed by a section (`<file>.md §3.1`,
`<file>.md section 3`, `<file>.md sections 3 and 4`, `<file>.md#anchor`); a path to a design note
or a reference (`design.md`, `style.md`, `REFERENCE.md`, `k3s-nvidia.md`, `real-apis-*.md`,
`real-nodes.md`, `<cloud>.md`, anything under a `shared/`, `clouds/` or `reference/` folder); a
relative path starting with `../`; or a bare `§N`, which cites the nearest `*.md` named before it on
the same line (in a Markdown file with none before it: the file itself). Other `*.md` names (a
generated report, another project's file) are not citations. The check fails on
  - an absolute path of a development machine used as a citation: anything under `/work/`, and a
    document (`*.md`, `*.rst`, `*.adoc`) or a `§` section under `/root/`, `/home/<user>/` or `/tmp/`
    (runtime paths such as /usr/local/bin/k3s, /etc/..., /var/lib/... or /tmp/x.json are not
    citations and pass);
  - a relative path that leaves the repository (`../shared/...`);
  - a cited `*.md` that is not a file of the repository, looked up beside the citing file, then from
    the repository root (documents of other projects are cited by URL);
  - a cited section that is not a heading of that file (`## 3. Title`, `### 3.1 Title`,
    `### F5. Title` define §3, §3.1, §F5), or an `#anchor` that is no heading's GitHub anchor;
  - a `§N` in a file that is not Markdown with no `*.md` before it on its line.

The files of tests/citations/ (this checker and its tests) spell the forms out and are not checked.

Usage: check_citations.py [--root DIR] [FILE...]   (default: every file `git ls-files` lists)
Exit status: 0 clean, 1 findings (one `path:line: message` per line on stdout), 77 not a git
checkout and no FILE given (ctest counts it as skipped).
"""

import argparse
import os
import re
import subprocess
import sys

# A section id: 3, 3.1, 3.2.1, or a lettered one such as F5, U5, H1, L7, V2.
SECTION_ID = r"(?:[A-Z]{1,2}\d+[a-z]?|\d+(?:\.\d+)*)"
SECTION_SIGN = re.compile(r"§\s*(" + SECTION_ID + r")")
# A Markdown path: letters, digits, '_', '-', '.', '/' ending in .md, not part of a longer word.
MD_TOKEN = re.compile(r"(?<![\w/.:@<>*$%-])((?:\.{1,2}/)*[\w][\w./-]*?\.md)(?![\w/-])")
URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s`'\")>\]]*")
# After a cited file: its section(s) or anchor.
SECTION_AFTER = re.compile(
    r"\A(?:#(?P<anchor>[\w-]+)"
    r"|,?\s*(?:§|sections?\s+)\s*(?P<list>" + SECTION_ID +
    r"(?:\s*(?:-|–|,|and|or|to)\s*§?\s*" + SECTION_ID + r"(?![\w]))*))")
LIST_ITEM = re.compile(SECTION_ID)
RFC_BEFORE = re.compile(r"RFC\s*\d+\s*$")
WORK_PATH = re.compile(r"(?<![\w.~-])/work/")
DEV_DOC_PATH = re.compile(
    r"(?<![\w.~-])(/root/|/home/[^/\s]+/|/tmp/)[^\s`'\")>\]]*?"
    r"(?:\.(?:md|rst|adoc)(?![\w])|\s*§)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HEADING_ID = re.compile(r"^(?:§\s*)?(" + SECTION_ID + r")(?:[.:)]|\s|$)")
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
CLOUDS = ("aws", "gcp", "hyperstack", "lambda", "digitalocean", "nebius", "verda", "massedcompute",
          "primeintellect", "docker")
NOTE_NAME = re.compile(r"(?:^|/)(?:design|style|REFERENCE|k3s-nvidia|real-apis-\d+|real-nodes|"
                       + "|".join(CLOUDS) + r")\.md$")
NOTE_FOLDER = re.compile(r"(?:^|/)(?:shared|clouds|reference)/")
SELF_FOLDER = "tests/citations/"
TEXT_SUFFIXES_SKIPPED = (".png", ".jpg", ".gz", ".tar", ".zst", ".so", ".bin", ".pem", ".der")


def github_anchor(title):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to '-'."""
    title = re.sub(r"[`*_~]|<[^>]+>", "", title).strip().lower()
    title = re.sub(r"[^\w\- ]", "", title)
    return title.replace(" ", "-")


class Document:
    """The section ids and anchors a Markdown file defines."""

    def __init__(self, path):
        self.sections = set()
        self.anchors = set()
        seen = {}
        in_fence = False
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            lines = []
        for line in lines:
            if line.lstrip().startswith("```"):
                in_fence = not in_fence
                continue
            for anchor in EXPLICIT_ANCHOR.findall(line):
                self.anchors.add(anchor)
            if in_fence:
                continue
            m = HEADING.match(line)
            if not m:
                continue
            title = m.group(2)
            idm = HEADING_ID.match(title)
            if idm:
                self.sections.add(idm.group(1))
            anchor = github_anchor(title)
            n = seen.get(anchor, 0)
            seen[anchor] = n + 1
            self.anchors.add(anchor if n == 0 else "%s-%d" % (anchor, n))


class Checker:
    def __init__(self, root, tracked):
        self.root = os.path.realpath(root)
        self.tracked = set(tracked)
        self.documents = {}
        self.findings = []

    def document(self, rel):
        if rel not in self.documents:
            self.documents[rel] = Document(os.path.join(self.root, rel))
        return self.documents[rel]

    def resolve(self, citing, token):
        """Repository-relative path of `token` cited from `citing`, None if absent, or ".." when
        it leaves the repository."""
        candidates = [os.path.join(os.path.dirname(citing), token)]
        if not token.startswith("."):
            candidates.append(token)
        left = False
        for candidate in candidates:
            rel = os.path.normpath(candidate)
            if rel == ".." or rel.startswith("../") or os.path.isabs(rel):
                left = True
                continue
            if rel in self.tracked or os.path.isfile(os.path.join(self.root, rel)):
                return rel
        return ".." if left else None

    def report(self, path, lineno, message):
        self.findings.append("%s:%d: %s" % (path, lineno, message))

    def check_sections(self, path, lineno, target, ids):
        doc = self.document(target)
        for sid in ids:
            if sid not in doc.sections:
                self.report(path, lineno, "%s has no section §%s" % (target, sid))

    def check_file(self, path):
        full = os.path.join(self.root, path)
        if path.endswith(TEXT_SUFFIXES_SKIPPED) or not os.path.isfile(full):
            return
        with open(full, "rb") as f:
            data = f.read()
        if b"\0" in data:
            return
        text = data.decode("utf-8", errors="replace")
        is_markdown = path.endswith(".md")
        for lineno, line in enumerate(text.splitlines(), 1):
            if WORK_PATH.search(line):
                self.report(path, lineno, "absolute path of a development machine (/work/...)")
            m = DEV_DOC_PATH.search(line)
            if m:
                self.report(path, lineno, "cites a document by an absolute path (%s...)" % m.group(1))
            if "§" not in line and ".md" not in line:
                continue
            self.check_line(path, lineno, line, is_markdown)

    def check_line(self, path, lineno, line, is_markdown):
        # (start, end, repository path or None) of each cited document, in line order; a URL is a
        # document outside the repository, so a section after it is not checked.
        cited = [(u.start(), u.end(), None) for u in URL.finditer(line)]
        line = URL.sub(lambda u: " " * len(u.group(0)), line)
        for m in MD_TOKEN.finditer(line):
            token = m.group(1)
            after = SECTION_AFTER.match(line[m.end():])
            is_citation = (after or token.startswith("../") or NOTE_NAME.search(token)
                           or NOTE_FOLDER.search(token))
            if not is_citation:
                continue
            target = self.resolve(path, token)
            if target == "..":
                self.report(path, lineno, "%s is outside the repository" % token)
                target = None
            elif target is None:
                self.report(path, lineno, "%s is not a file of the repository" % token)
            cited.append((m.start(), m.end(), target))
            cited.sort()
            if target is None or not after:
                continue
            if after.group("anchor"):
                if after.group("anchor") not in self.document(target).anchors:
                    self.report(path, lineno, "%s has no anchor #%s" % (target, after.group("anchor")))
        for m in SECTION_SIGN.finditer(line):
            owner = None
            for start, end, target in cited:
                if end <= m.start():
                    owner = (target,)
            if owner is None:
                if RFC_BEFORE.search(line[:m.start()]):
                    continue
                if is_markdown:
                    owner = (path,)
                else:
                    self.report(path, lineno, "§%s cites no document (name the .md file before it)"
                                % m.group(1))
                    continue
            if owner[0] is not None:
                self.check_sections(path, lineno, owner[0], [m.group(1)])
        # "<file>.md section 3", "sections 3 and 4", "§3.1-3.4": every id of the list.
        for start, end, target in cited:
            if target is None:
                continue
            after = SECTION_AFTER.match(line[end:])
            if after and after.group("list"):
                ids = LIST_ITEM.findall(after.group("list"))
                signed = set(SECTION_SIGN.findall(after.group(0)))
                self.check_sections(path, lineno, target, [i for i in ids if i not in signed])


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return [p for p in out.decode("utf-8", errors="replace").split("\0") if p]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    parser.add_argument("files", nargs="*")
    args = parser.parse_args(argv)
    tracked = tracked_files(args.root)
    if tracked is None and not args.files:
        print("not a git checkout: nothing to check")
        return 77
    checker = Checker(args.root, tracked or [])
    for path in args.files or tracked:
        if not path.startswith(SELF_FOLDER):
            checker.check_file(path)
    for finding in checker.findings:
        print(finding)
    if checker.findings:
        print("%d citation(s) do not resolve from the checkout; docs/design.md and "
              "plugins/<cloud>/REFERENCE.md hold what the code cites" % len(checker.findings))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
