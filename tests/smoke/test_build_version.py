"""The git part of every version string (manifest.json, cell.json, `--version`) comes from cmake/git_sha.cmake, run at
every build: the short commit, and for a tree with uncommitted changes to tracked files "-dirty." and the first 8 hex
digits of the SHA-256 of `git diff HEAD --binary`. Two builds of one commit with different uncommitted changes must
differ, or a sweep or reproduce folder reuses cells that another build's code computed.

The script is run here on a scratch repository, as the build runs it, and its header compared with git and hashlib."""
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "cmake", "git_sha.cmake"))


def git(repository, *arguments):
    return subprocess.run(["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", *arguments],
                          cwd=repository, check=True, capture_output=True).stdout


class BuildVersion(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.TemporaryDirectory()
        self.repository = os.path.join(self.scratch.name, "repository")
        os.mkdir(self.repository)
        git(self.repository, "init", "-q")
        self.write("source.cpp", "int answer() { return 42; }\n")
        git(self.repository, "add", "source.cpp")
        git(self.repository, "commit", "-q", "-m", "first")
        self.commit = git(self.repository, "rev-parse", "--short=12", "HEAD").decode().strip()

    def tearDown(self):
        self.scratch.cleanup()

    def write(self, name, text):
        with open(os.path.join(self.repository, name), "w") as f:
            f.write(text)

    def version(self):
        output = os.path.join(self.scratch.name, "git_sha.hpp")
        subprocess.run(["cmake", f"-DSOURCE_DIR={self.repository}", f"-DOUTPUT={output}", "-P", SCRIPT], check=True)
        with open(output) as f:
            match = re.search(r'#define RANKSCOPE_GIT_SHA "([^"]*)"', f.read())
        self.assertIsNotNone(match)
        return match.group(1)

    def expected_dirty(self):
        diff = git(self.repository, "diff", "HEAD", "--binary")
        return f"{self.commit}-dirty.{hashlib.sha256(diff).hexdigest()[:8]}"

    def test_clean_tree_is_the_commit(self):
        self.assertEqual(self.version(), self.commit)
        self.write("notes.txt", "untracked files do not make a build dirty\n")
        self.assertEqual(self.version(), self.commit)

    def test_uncommitted_changes_are_hashed(self):
        self.write("source.cpp", "int answer() { return 43; }\n")
        first = self.version()
        self.assertEqual(first, self.expected_dirty())
        self.write("source.cpp", "int answer() { return 44; }\n")
        second = self.version()
        self.assertEqual(second, self.expected_dirty())
        self.assertNotEqual(first, second)
        self.write("source.cpp", "int answer() { return 43; }\n")
        self.assertEqual(self.version(), first, "the same changes give the same version")
        self.write("source.cpp", "int answer() { return 42; }\n")
        self.assertEqual(self.version(), self.commit)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
