"""ctest_labels: every ctest entry of a build tree is labelled as
cmake/testing.cmake says: exactly one kind, and otherwise only what it
needs and the known flags. An entry added without manypy_test_labels has
no label and fails here.

usage: check_labels.py <ctest> <build dir> <kinds> <needs> <flags>
(each list separated by ';', as CMake writes lists)"""
import json
import subprocess
import sys


def main() -> int:
    ctest, build, kinds, needs, flags = sys.argv[1:6]
    kinds, others = set(kinds.split(";")), set(needs.split(";")) | set(flags.split(";"))
    listing = subprocess.run(
        [ctest, "--show-only=json-v1"], cwd=build, check=True, capture_output=True, text=True
    ).stdout
    problems = []
    tests = json.loads(listing)["tests"]
    for test in tests:
        labels = []
        for prop in test.get("properties", []):
            if prop["name"] == "LABELS":
                labels = prop["value"]
        its_kinds = [label for label in labels if label in kinds]
        unknown = [label for label in labels if label not in kinds and label not in others]
        if len(its_kinds) != 1:
            problems.append(f"{test['name']}: {len(its_kinds)} kinds in {labels or 'no labels'}")
        if unknown:
            problems.append(f"{test['name']}: unknown labels {unknown}")
    for problem in problems:
        print(f"ctest_labels: {problem}")
    print(f"ctest_labels: {len(tests)} entries, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
