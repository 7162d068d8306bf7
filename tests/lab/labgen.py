#!/usr/bin/python3
"""Write the lab's static content into DIR (tests/lab/lab.sh up calls it).

Everything is made here, offline: a tiny pure-python wheel and a PEP 503
simple index for pypi.org / files.pythonhosted.org, an npm packument and
tarball for registry.npmjs.org, and the "evil" packages whose metadata sends
a client to evil.test. No program that could reach a network is run.
"""
import base64
import hashlib
import io
import json
import os
import sys
import tarfile
import time
import zipfile

# Fixed timestamps keep the artefacts reproducible run to run.
EPOCH = (2024, 1, 1, 0, 0, 0)


def write(path, data, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


def b64_digest(data, algo):
    return base64.urlsafe_b64encode(hashlib.new(algo, data).digest()).rstrip(b"=").decode()


def make_wheel(name, version, files):
    """A wheel is a zip with a dist-info directory (PEP 427)."""
    dist_info = f"{name}-{version}.dist-info"
    files = dict(files)
    files[f"{dist_info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        f"Summary: a package served by the airlock test lab\n"
    )
    files[f"{dist_info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: airlock-lab\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = []
    for path, text in files.items():
        data = text.encode()
        record.append(f"{path},sha256={b64_digest(data, 'sha256')},{len(data)}")
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = "\n".join(record) + "\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for path, text in files.items():
            info = zipfile.ZipInfo(path, EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, text)
    return buf.getvalue()


def simple_page(name, links):
    rows = "\n".join(f'    <a href="{url}">{fn}</a><br/>' for fn, url in links)
    return (
        "<!DOCTYPE html>\n<html>\n  <head><meta name=\"pypi:repository-version\" content=\"1.0\">"
        f"<title>Links for {name}</title></head>\n  <body>\n    <h1>Links for {name}</h1>\n"
        f"{rows}\n  </body>\n</html>\n"
    )


def make_pypi(root):
    www = os.path.join(root, "www")
    projects = []
    wheel = make_wheel("labpkg", "1.0", {
        "labpkg/__init__.py": 'VERSION = "1.0"\n\n\ndef hello():\n    return "hello from labpkg"\n',
    })
    fn = "labpkg-1.0-py3-none-any.whl"
    digest = hashlib.sha256(wheel).hexdigest()
    rel = f"packages/{digest[:2]}/{digest[2:4]}/{fn}"
    write(os.path.join(www, "files.pythonhosted.org", rel), wheel)
    write(os.path.join(www, "pypi.org", "simple", "labpkg", "index.html"),
          simple_page("labpkg", [(fn, f"https://files.pythonhosted.org/{rel}#sha256={digest}")]))
    projects.append("labpkg")

    # evilpkg's index sends pip to evil.test for the file itself; the
    # wheel exists only so a client that got through would get a 200.
    evil = make_wheel("evilpkg", "1.0", {"evilpkg/__init__.py": "STOLEN = True\n"})
    fn = "evilpkg-1.0-py3-none-any.whl"
    digest = hashlib.sha256(evil).hexdigest()
    write(os.path.join(www, "evil.test", "packages", fn), evil)
    write(os.path.join(www, "pypi.org", "simple", "evilpkg", "index.html"),
          simple_page("evilpkg", [(fn, f"https://evil.test/packages/{fn}#sha256={digest}")]))
    projects.append("evilpkg")

    write(os.path.join(www, "pypi.org", "simple", "index.html"),
          simple_page("simple index", [(p, f"/simple/{p}/") for p in projects]))


def npm_tarball(name, version, files):
    """What `npm pack` makes: a gzipped tar with everything under package/."""
    buf = io.BytesIO()
    mtime = time.mktime(EPOCH + (0, 0, -1))
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.USTAR_FORMAT) as t:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"package/{path}")
            info.size = len(data)
            info.mode = 0o644
            info.mtime = mtime
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def packument(name, version, tarball_url, tgz, manifest):
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()
    v = dict(manifest)
    v.update({
        "_id": f"{name}@{version}",
        "dist": {"tarball": tarball_url, "shasum": hashlib.sha1(tgz).hexdigest(),
                 "integrity": integrity},
    })
    return json.dumps({
        "_id": name, "name": name, "dist-tags": {"latest": version},
        "versions": {version: v},
        "time": {"created": "2024-01-01T00:00:00.000Z", "modified": "2024-01-01T00:00:00.000Z",
                 version: "2024-01-01T00:00:00.000Z"},
    }, indent=1) + "\n"


def make_npm(root):
    www = os.path.join(root, "www")
    for name, host in (("labnpm", "registry.npmjs.org"), ("evilnpm", "evil.test")):
        manifest = {"name": name, "version": "1.0.0", "main": "index.js",
                    "description": "a package served by the airlock test lab", "license": "MIT"}
        tgz = npm_tarball(name, "1.0.0", {
            "package.json": json.dumps(manifest, indent=1) + "\n",
            "index.js": f'module.exports = () => "hello from {name}";\n',
        })
        fn = f"{name}-1.0.0.tgz"
        write(os.path.join(www, host, name, "-", fn), tgz)
        url = f"https://{host}/{name}/-/{fn}"
        write(os.path.join(www, "registry.npmjs.org", name, "index.json"),
              packument(name, "1.0.0", url, tgz, manifest))


def make_crates(root):
    """crates.io as Debian 12's cargo (1.65) reaches it: the git index
    (github.com/rust-lang/crates.io-index; lab.sh makes it a repository)
    and the .crate files where its config.json's "dl" points."""
    www = os.path.join(root, "www")
    buf = io.BytesIO()
    mtime = time.mktime(EPOCH + (0, 0, -1))
    files = {
        "Cargo.toml": '[package]\nname = "labcrate"\nversion = "1.0.0"\nedition = "2018"\n',
        "src/lib.rs": "pub fn hello() -> &'static str {\n    \"hello from labcrate\"\n}\n",
    }
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.USTAR_FORMAT) as t:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"labcrate-1.0.0/{path}")
            info.size = len(data)
            info.mode = 0o644
            info.mtime = mtime
            t.addfile(info, io.BytesIO(data))
    crate = buf.getvalue()
    write(os.path.join(www, "static.crates.io", "crates", "labcrate", "1.0.0", "download"), crate)
    idx = os.path.join(root, "tmp", "crates-index")
    write(os.path.join(idx, "config.json"),
          json.dumps({"dl": "https://static.crates.io/crates", "api": "https://crates.io"}) + "\n")
    write(os.path.join(idx, "la", "bc", "labcrate"),
          json.dumps({"name": "labcrate", "vers": "1.0.0", "deps": [],
                      "cksum": hashlib.sha256(crate).hexdigest(), "features": {},
                      "yanked": False}) + "\n")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: labgen.py DIR")
    root = sys.argv[1]
    make_pypi(root)
    make_npm(root)
    make_crates(root)
    os.makedirs(os.path.join(root, "www", "github.com"), exist_ok=True)
    write(os.path.join(root, "resolv.conf"), "nameserver 192.0.2.53\noptions timeout:2 attempts:1\n")
    write(os.path.join(root, "hosts"), "127.0.0.1 localhost\n::1 localhost\n")


if __name__ == "__main__":
    main()
