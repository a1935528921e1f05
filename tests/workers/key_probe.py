"""Run by netns-cluster.sh on every worker, as the training user, inside the worker's namespaces:
which SSH private keys of the cluster can this worker read?

It looks at the cluster's folders under /run (the shared one and whatever else this node can see)
and through /proc/PID/root of every process it can see (another mount namespace's files), reads every
file that holds a private key, derives its public key and names it against the published public
material: the launcher's client public key and the workers' registered host public keys.
Prints lines starting with "key-probe ADDR:"; the test reads them.
"""

from __future__ import annotations

import glob
import os
import stat
import subprocess
import tempfile


def derive_public(text: str) -> str | None:
    with tempfile.NamedTemporaryFile("w", suffix=".key", delete=False) as f:
        f.write(text)
    try:
        os.chmod(f.name, 0o600)
        proc = subprocess.run(["ssh-keygen", "-y", "-f", f.name], capture_output=True, text=True, timeout=30)
        return " ".join(proc.stdout.split()[:2]) if proc.returncode == 0 else None
    finally:
        os.unlink(f.name)


def main() -> None:
    mine = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=30).stdout.split()
    me = mine[0] if mine else "?"
    shared = glob.glob("/run/hvdkit-netns.*/cluster")
    client = set()
    for path in glob.glob("/run/hvdkit-netns.*/cluster/ssh/id_ed25519.pub"):
        with open(path) as f:
            client.add(" ".join(f.read().split()[:2]))
    hosts = {}
    for path in glob.glob("/run/hvdkit-netns.*/cluster/hosts/*"):
        with open(path) as f:
            addr, kind, key = f.read().split()[:3]
        hosts[f"{kind} {key}"] = addr
    print(f"key-probe {me}: shared folder {shared}, published client key {'found' if client else 'MISSING'}, "
          f"{len(hosts)} registered host keys", flush=True)
    roots = glob.glob("/run/hvdkit-netns.*") + glob.glob("/proc/[0-9]*/root/run/hvdkit-netns.*")
    seen: set[tuple[int, int]] = set()
    checked = 0
    for root in roots:
        for folder, _dirs, files in os.walk(root, onerror=lambda e: None):
            for name in files:
                path = os.path.join(folder, name)
                try:
                    st = os.stat(path)
                    # regular files only: opening a fifo (the cluster's "ready" pipes) would block
                    if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in seen or st.st_size > 65536:
                        continue
                    seen.add((st.st_dev, st.st_ino))
                    with open(path, errors="replace") as f:
                        text = f.read()
                except OSError:
                    continue
                checked += 1
                if "PRIVATE KEY-----" not in text:
                    continue
                public = derive_public(text)
                if public in client:
                    label = "THE LAUNCHER CLIENT PRIVATE KEY"
                elif public in hosts and hosts[public] in mine:
                    label = "its own host key"
                elif public in hosts:
                    label = f"THE HOST PRIVATE KEY OF {hosts[public]}"
                else:
                    label = "an unregistered key"
                print(f"key-probe {me}: can read {path}: {label}", flush=True)
    print(f"key-probe {me}: {checked} readable files checked", flush=True)


if __name__ == "__main__":
    main()
