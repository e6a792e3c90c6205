"""hpcml: ansible-test's pip bootstrap (get-pip.py) from the Python's own ensurepip, for hosts that cannot reach
ci-files.testing.ansible.com. tools/collection_sanity.py puts it where ansible-test looks for its cached get-pip.py.

ansible-test runs it in a venv made without pip, as `get-pip.py [pip options] pip==X --no-setuptools --no-wheel`.
"""

import subprocess
import sys


def main() -> None:
    args = sys.argv[1:]
    options = [arg for arg in args if arg not in ("--no-setuptools", "--no-wheel")]
    # ensurepip installs the pip (and, before Python 3.12, setuptools) wheels bundled with Python: no network.
    subprocess.run([sys.executable, "-m", "ensurepip", "--default-pip"], check=True, stdout=subprocess.DEVNULL)
    pip = [sys.executable, "-m", "pip"]
    # The version ansible-test asks for, from the configured index; without one the bundled pip does the installs.
    if subprocess.run([*pip, "install", "-q", *options], check=False).returncode != 0:
        print("hpcml get-pip: could not install " + " ".join(options) + "; keeping ensurepip's pip", file=sys.stderr)
    if "--no-setuptools" in args:
        subprocess.run([*pip, "uninstall", "-q", "-y", "setuptools"], check=False, stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
