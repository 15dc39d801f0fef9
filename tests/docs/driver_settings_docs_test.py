#!/usr/bin/python3
"""The settings table of a driver's README against what `gpuprov drivers NAME` prints.

Usage: driver_settings_docs_test.py GPUPROV DRIVER_DIR README

Runs `GPUPROV --driver-path DRIVER_DIR drivers NAME --output json` (NAME: the README's folder)
and fails when a key is in the README's "## Settings" table and not declared by the driver, or
the other way round, when their types differ, when a table key's members (the backticked
`{member = ..., ...}` in its meaning) differ, or when a former name the driver still reads is not
named in that section. One key per row: | `key` | type | meaning |.
"""
import json
import os
import re
import subprocess
import sys

TYPES = {"string", "integer", "boolean", "string list", "table"}


def settings_section(readme_text):
    """The lines of the first '## Settings' section."""
    lines = readme_text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("## Settings")), None)
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start + 1:end]


def readme_keys(section, problems):
    """key -> (type, meaning) from the section's table."""
    keys = {}
    rows = [l for l in section if l.startswith("|")]
    if len(rows) < 2 or [c.strip() for c in rows[0].strip("|").split("|")] != ["key", "type", "meaning"]:
        problems.append("the Settings section has no table with the columns | key | type | meaning |")
        return keys
    for row in rows[2:]:
        cells = [c.strip() for c in row.strip().strip("|").split("|", 2)]
        if len(cells) != 3:
            problems.append(f"README row has not three cells: {row}")
            continue
        name = re.fullmatch(r"`([a-z0-9_]+)`", cells[0])
        if not name:
            problems.append(f"README row's key is not one backticked name: {cells[0]}")
            continue
        if cells[1] not in TYPES:
            problems.append(f"README key `{name.group(1)}` has type '{cells[1]}', not one of {sorted(TYPES)}")
        keys[name.group(1)] = (cells[1], cells[2])
    return keys


def members_in(meaning):
    """The member names of the first backticked {...} in a table key's meaning, or None."""
    m = re.search(r"`\{([^`}]*)\}`", meaning)
    if not m:
        return None
    return {part.split("=")[0].strip() for part in m.group(1).split(",") if part.strip()}


def main():
    gpuprov, driver_dir, readme = sys.argv[1:4]
    name = os.path.basename(os.path.dirname(os.path.abspath(readme)))
    env = dict(os.environ, GPUPROV_HOME=os.environ.get("TMPDIR", "/tmp") + f"/gpuprov-settings-docs-{name}-{os.getpid()}")
    out = subprocess.run([gpuprov, "--driver-path", driver_dir, "drivers", name, "--output", "json"],
                         capture_output=True, text=True, env=env, timeout=120)
    if out.returncode != 0:
        print(f"`gpuprov drivers {name}` failed ({out.returncode}): {out.stderr}{out.stdout}")
        return 1
    info = json.loads(out.stdout)
    if info.get("config_keys") is None:
        print(f"the {name} driver declares no config keys")
        return 1
    declared = {"endpoint": {"name": "endpoint", "type": "string"}}
    former = {}
    for key in info["config_keys"]:
        if "replaced_by" in key:
            former[key["name"]] = key["replaced_by"]
        else:
            declared[key["name"]] = key

    with open(readme, encoding="utf-8") as f:
        section = settings_section(f.read())
    problems = []
    if section is None:
        print(f"{readme} has no '## Settings' section")
        return 1
    documented = readme_keys(section, problems)
    for key in sorted(set(declared) - set(documented)):
        problems.append(f"`{key}` ({declared[key]['type']}) is declared by the driver but not in the README's table")
    for key in sorted(set(documented) - set(declared)):
        problems.append(f"`{key}` is in the README's table but the driver does not declare it")
    for key in sorted(set(declared) & set(documented)):
        want, meaning = declared[key]["type"], documented[key][0]
        if want != meaning:
            problems.append(f"`{key}` is {want} in the driver but {meaning} in the README")
        if want == "table":
            members = {m["name"] for m in declared[key].get("members", [])}
            written = members_in(documented[key][1])
            if written is None:
                problems.append(f"`{key}` is a table: its meaning must list the members as `{{a = ..., b = ...}}`")
            elif written != members:
                problems.append(f"`{key}` members differ: driver {sorted(members)}, README {sorted(written)}")
    text = "\n".join(section)
    for old, new in sorted(former.items()):
        if f"`{old}`" not in text:
            problems.append(f"former name `{old}` (now `{new}`) is not named in the Settings section")
    for p in problems:
        print(f"{readme}: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
