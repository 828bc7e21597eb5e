"""Write a simulated node's files in one run: tests/simnode/tasks/put-files.yml sends them here.

Reads one JSON object on stdin, ``{"directories": [path, ...], "files": [{"dest": path, "mode":
"0644", "content": text}, ...]}``, creates the directories (and every file's parent) with mode 0755,
writes each file through a temporary file beside it and renames it into place, and prints each path
it wrote. A prepare play's copy and file tasks cost a module run per file on every node; this costs
one. Runs on the simulated node's python3 (3.6 and later): standard library only.
"""

import json
import os
import sys


def main():
    wanted = json.load(sys.stdin)
    for path in wanted.get("directories", []):
        os.makedirs(path, mode=0o755, exist_ok=True)
        print(path + "/")
    for item in wanted.get("files", []):
        dest = item["dest"]
        os.makedirs(os.path.dirname(dest), mode=0o755, exist_ok=True)
        temporary = dest + ".put-files"
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(item["content"])
        os.chmod(temporary, int(item["mode"], 8))
        os.replace(temporary, dest)
        print(dest)


if __name__ == "__main__":
    main()
