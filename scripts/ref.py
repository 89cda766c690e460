#!/usr/bin/env python3
"""Install the references scripts/references.toml lists, idempotently.

  python3 scripts/ref.py install NAME...  install each (and what it requires); print its path
  python3 scripts/ref.py list             every reference, its kind, pin and whether installed
  python3 scripts/ref.py pick NAME [VERSION [ACCEPT]]
                                          print the apt version NAME would take (or would with
                                          that pin), given the versions the archive offers on
                                          stdin, one per line

Output on stdout is only the paths (one line per NAME, empty for apt), so a
caller can take `$(python3 scripts/ref.py install mathverify)` as a python.
Installs take a lock per reference: make test installs several at once and
test packages ask for the same ones in parallel.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "scripts" / "references.toml"
CACHE = Path(os.environ.get("PRORL_CACHE", Path.home() / ".cache" / "prorl"))
KINDS = {"pypi", "wheel", "npm", "apt", "source"}
KEYS = {
    "kind",
    "purpose",
    "requires",
    "after",
    "env",
    "packages",
    "requirements",
    "no_deps",
    "local",
    "venv",
    "spec",
    "file",
    "sha256",
    "dir",
    "ignore_scripts",
    "version",
    "accept",
    "versioned",
    "build",
}


def load() -> dict[str, dict[str, Any]]:
    with MANIFEST.open("rb") as f:
        refs: dict[str, dict[str, Any]] = tomllib.load(f)
    for name, r in refs.items():
        if r.get("kind") not in KINDS:
            raise SystemExit(f"{MANIFEST}: [{name}] kind must be one of {sorted(KINDS)}")
        if unknown := set(r) - KEYS:
            raise SystemExit(f"{MANIFEST}: [{name}] unknown keys {sorted(unknown)}")
        for dep in r.get("requires", []):
            if dep not in refs:
                raise SystemExit(f"{MANIFEST}: [{name}] requires unknown reference {dep!r}")
    return refs


def log(msg: str) -> None:
    print(f"ref: {msg}", file=sys.stderr)


def run(cmd: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> str:
    """Runs cmd; its output goes to stderr except what it prints, returned."""
    out = subprocess.run(cmd, cwd=cwd, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, check=True, text=True)
    return out.stdout


def want(name: str, r: dict[str, Any]) -> str:
    """The stamp of an entry: its fields and the files it names."""
    h = hashlib.sha256(json.dumps({name: r}, sort_keys=True).encode())
    for key in ("requirements",):
        if key in r:
            h.update((ROOT / r[key]).read_bytes())
    return h.hexdigest()


def stamped(stamp: Path, value: str) -> bool:
    try:
        return stamp.read_text().strip() == value
    except OSError:
        return False


def pypi(name: str, r: dict[str, Any]) -> str:
    venv = CACHE / r.get("venv", f"venv-{name}")
    py = venv / "bin" / "python"
    stamp, value = venv / ".prorl-installed", want(name, r)
    if not stamped(stamp, value):
        log(f"{name}: installing into {venv}")
        if subprocess.run([sys.executable, "-m", "venv", str(venv)], stderr=subprocess.DEVNULL).returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        args = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        if r.get("no_deps"):
            args.append("--no-deps")
        args += r.get("packages", [])
        if "requirements" in r:
            args += ["-r", str(ROOT / r["requirements"])]
        run(args)
        stamp.write_text(value + "\n")
    if "local" in r:
        # As a user installs it (not editable): tests import what pip installed.
        pkg = ROOT / r["local"]
        run(
            [
                str(py),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "--no-deps",
                "--no-build-isolation",
                "--force-reinstall",
                f"./{r['local']}",
            ]
        )
        shutil.rmtree(pkg / "build", ignore_errors=True)
        for egg in (pkg / "src").glob("*.egg-info"):
            shutil.rmtree(egg, ignore_errors=True)
    return str(py)


def sha256(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def wheel(name: str, r: dict[str, Any]) -> str:
    d = CACHE / "wheels"
    whl = d / r["file"]
    if sha256(whl) != r["sha256"]:
        log(f"{name}: fetching {r['spec']}")
        d.mkdir(parents=True, exist_ok=True)
        venv = CACHE / "venv-fetch"  # a Debian python3 may have no pip of its own
        if not (venv / "bin" / "pip").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        run(
            [
                str(venv / "bin" / "pip"),
                "download",
                "-q",
                "--disable-pip-version-check",
                "--no-deps",
                "--only-binary",
                ":all:",
                r["spec"],
                "-d",
                str(d),
            ]
        )
        if (got := sha256(whl)) != r["sha256"]:
            raise SystemExit(f"ref: {name}: {whl} has sha256 {got or 'nothing'}, want {r['sha256']}")
    return str(whl)


def npm(name: str, r: dict[str, Any]) -> str:
    if shutil.which("npm") is None:  # only when missing: a Node.js from elsewhere is kept
        apt_ensure(["nodejs", "npm"])
    d = CACHE / r.get("dir", f"npm-{name}")
    d.mkdir(parents=True, exist_ok=True)
    if not (d / "package.json").exists():
        (d / "package.json").write_text(json.dumps({"name": f"prorl-{name}", "private": True}) + "\n")
    stamp, value = d / ".prorl-installed", want(name, r)
    if not stamped(stamp, value):
        log(f"{name}: installing into {d}")
        args = ["npm", "install", "--no-audit", "--no-fund"]
        if r.get("ignore_scripts"):
            args.append("--ignore-scripts")
        subprocess.run(args + r["packages"], cwd=d, env={**os.environ, **r.get("env", {})}, stdout=sys.stderr, check=True)
        stamp.write_text(value + "\n")
    return str(d / "node_modules")


APT = ["bash", str(ROOT / "scripts" / "apt.sh")]


def apt_version(pkg: str) -> str:
    return run(APT + ["version", pkg]).strip()


def apt_ensure(pkgs: list[str]) -> None:
    run(APT + ["ensure", *pkgs])


def pick(r: dict[str, Any], offered: list[str]) -> str:
    """The version to install: the pinned one if offered, else the newest offered one it accepts."""
    if r.get("version") in offered:
        return str(r["version"])
    ok = [v for v in offered if r.get("accept") and v.startswith(r["accept"])]
    if not ok:
        return ""
    out = subprocess.run(["sort", "-V"], input="\n".join(ok) + "\n", stdout=subprocess.PIPE, text=True, check=True)
    return out.stdout.split()[-1]


def accepted(r: dict[str, Any], v: str) -> bool:
    return bool(v) and (v == r.get("version") or bool(r.get("accept")) and v.startswith(r["accept"]))


def apt(name: str, r: dict[str, Any]) -> str:
    if "version" not in r and "accept" not in r:
        apt_ensure(r["packages"])
        return ""
    versioned = r.get("versioned", r["packages"])
    if all(accepted(r, apt_version(p)) for p in versioned) and all(apt_version(p) for p in r["packages"]):
        return ""
    run(APT + ["update"])
    madison = run(["apt-cache", "madison", versioned[0]])
    v = pick(r, [line.split("|")[1].strip() for line in madison.splitlines() if line.count("|") >= 2])
    if not v:
        raise SystemExit(
            f"ref: {name}: Debian offers no version of {versioned[0]} starting {r.get('accept')!r} (wanted {r.get('version')})"
        )
    if r.get("version") and v != r["version"]:
        log(f"{name}: {r['version']} is no longer offered; installing {v}, which {r['accept']!r} accepts")
    run(APT + ["install", *[f"{p}={v}" if p in versioned else p for p in r["packages"]]])
    return ""


def source(name: str, r: dict[str, Any]) -> str:
    return run(["bash", str(ROOT / r["build"])], env={"VERSION": r["version"]}).strip()


INSTALL = {"pypi": pypi, "wheel": wheel, "npm": npm, "apt": apt, "source": source}


def install(refs: dict[str, dict[str, Any]], name: str, done: dict[str, str]) -> str:
    if name in done:
        return done[name]
    if name not in refs:
        raise SystemExit(f"ref: no reference {name!r} in {MANIFEST} (have: {', '.join(refs)})")
    r = refs[name]
    for dep in r.get("requires", []):
        install(refs, dep, done)
    locks = CACHE / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = INSTALL[r["kind"]](name, r)
        if "after" in r:
            subprocess.run(r["after"], cwd=ROOT, env={**os.environ, "PRORL_REF": path}, stdout=sys.stderr, check=True)
    done[name] = path
    return path


def installed(name: str, r: dict[str, Any]) -> bool:
    match r["kind"]:
        case "pypi":
            return stamped(CACHE / r.get("venv", f"venv-{name}") / ".prorl-installed", want(name, r))
        case "npm":
            return stamped(CACHE / r.get("dir", f"npm-{name}") / ".prorl-installed", want(name, r))
        case "wheel":
            return sha256(CACHE / "wheels" / r["file"]) == r["sha256"]
        case "apt":
            return all(apt_version(p) for p in r["packages"]) and all(
                accepted(r, apt_version(p)) for p in r.get("versioned", r["packages"]) if "version" in r or "accept" in r
            )
    return False  # source: its build script knows


def main(argv: list[str]) -> int:
    refs = load()
    match argv:
        case ["install", *names] if names:
            done: dict[str, str] = {}
            for n in names:
                print(install(refs, n, done), flush=True)
        case ["list"]:
            for n, r in refs.items():
                pin = r.get("version") or r.get("spec") or r.get("requirements") or ", ".join(r.get("packages", [])[:2])
                print(f"{n:12} {r['kind']:6} {'yes' if installed(n, r) else 'no ':3}  {pin}  ({r.get('purpose', '')})")
        case ["pick", name, *pin] if name in refs and len(pin) <= 2:
            r = dict(refs[name])
            if pin:  # another pin, as an edit of the manifest would give
                r["version"], r["accept"] = pin[0], pin[1] if len(pin) > 1 else pin[0].split("-")[0] + "-"
            print(pick(r, sys.stdin.read().split()))
        case _:
            print(__doc__, file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
