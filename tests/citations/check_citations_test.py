#!/usr/bin/env python3
"""The rules of check_citations.py, each on a small tree of its own."""

import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_citations  # noqa: E402

DESIGN = """# Design
## 1. Layout
## 3. Provisioning flow
### 3.1 Launch
"""
REFERENCE = """# Cloud
## 8. Errors
### F5. Zone failover
"""


class CheckCitations(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp()
        self.files = {}
        self.write("docs/design.md", DESIGN)
        self.write("plugins/aws/REFERENCE.md", REFERENCE)

    def tearDown(self):
        shutil.rmtree(self.root)

    def write(self, path, text):
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)
        self.files[path] = text

    def findings(self, path, text):
        self.write(path, text)
        checker = check_citations.Checker(self.root, list(self.files))
        checker.check_file(path)
        return checker.findings

    def test_repo_relative_citations_with_existing_sections_pass(self):
        self.assertEqual(self.findings("core/a.h", "// docs/design.md §3.1 and §1; docs/design.md "
                                                   "section 3; docs/design.md sections 1 and 3.\n"),
                         [])
        self.assertEqual(self.findings("plugins/aws/a.cc",
                                       "// REFERENCE.md §8, §F5 (beside the citing file).\n"), [])
        self.assertEqual(self.findings("tests/emulators/e.cc",
                                       "// plugins/aws/REFERENCE.md §8-§F5\n"), [])

    def test_missing_section_fails(self):
        self.assertEqual(self.findings("core/a.h", "// docs/design.md §9\n"),
                         ["core/a.h:1: docs/design.md has no section §9"])
        self.assertEqual(self.findings("core/b.h", "// docs/design.md sections 1 and 4\n"),
                         ["core/b.h:1: docs/design.md has no section §4"])

    def test_range_checks_both_ends(self):
        self.assertEqual(self.findings("core/a.h", "// docs/design.md §3.1-3.4\n"),
                         ["core/a.h:1: docs/design.md has no section §3.4"])

    def test_anchor_must_be_a_heading(self):
        self.assertEqual(self.findings("README.md", "[x](docs/design.md#3-provisioning-flow)\n"), [])
        self.assertEqual(self.findings("README.md", "[x](docs/design.md#nowhere)\n"),
                         ["README.md:1: docs/design.md has no anchor #nowhere"])

    def test_cited_note_that_is_not_in_the_repository_fails(self):
        self.assertEqual(self.findings("plugins/gcp/a.cc", "// clouds/gcp.md says so\n"),
                         ["plugins/gcp/a.cc:1: clouds/gcp.md is not a file of the repository"])
        self.assertEqual(self.findings("core/a.h", "// design.md section 3\n"),
                         ["core/a.h:1: design.md is not a file of the repository"])

    def test_path_leaving_the_repository_fails(self):
        self.assertEqual(self.findings("core/a.h", "// ../../shared/design.md\n"),
                         ["core/a.h:1: ../../shared/design.md is outside the repository"])

    def test_absolute_development_paths_fail(self):
        self.assertEqual(self.findings("core/a.h", "// facts: /work/shared/clouds/aws.md\n")[0],
                         "core/a.h:1: absolute path of a development machine (/work/...)")
        self.assertEqual(self.findings("core/b.h", "// see /home/alice/notes/design.md\n"),
                         ["core/b.h:1: cites a document by an absolute path (/home/alice/...)"])
        self.assertIn("core/c.h:1: cites a document by an absolute path (/tmp/...)",
                      self.findings("core/c.h", "// see /tmp/notes §3\n"))

    def test_runtime_paths_pass(self):
        text = ("K3S=/usr/local/bin/k3s; cat /etc/rancher/k3s/config.yaml /var/lib/gpuprov/x.json\n"
                "out=/tmp/report.json; home=/home/u/.gpu-provisioner; key=/root/.ssh/id_ed25519\n")
        self.assertEqual(self.findings("installer/x.sh", text), [])

    def test_bare_section_needs_a_document_outside_markdown(self):
        self.assertEqual(self.findings("plugins/aws/a.cc", "// reference §8\n"),
                         ["plugins/aws/a.cc:1: §8 cites no document (name the .md file before it)"])
        self.assertEqual(self.findings("plugins/aws/b.cc", "// RFC 7515 §2\n"), [])

    def test_bare_section_in_markdown_cites_the_file_itself(self):
        self.assertEqual(self.findings("docs/design.md", DESIGN + "See §3.1 and §7.\n"),
                         ["docs/design.md:5: docs/design.md has no section §7"])

    def test_other_markdown_names_are_not_citations(self):
        self.assertEqual(self.findings("bench/run.sh", "# writes build/fleet-summary.md\n"), [])
        self.assertEqual(self.findings("tests/emulators/h.cc",
                                       "// H-SDK docs/PricebookApi.md: the pricebook\n"), [])

    def test_urls_are_not_checked(self):
        self.assertEqual(self.findings("core/a.h",
                                       "// https://example.com/design.md §9 (someone else's)\n"), [])


if __name__ == "__main__":
    unittest.main()
