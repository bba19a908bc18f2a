"""Prints where pure Python modules go for an installation prefix (argv[1]),
so that the system's Python finds them: Debian's /usr/lib/python3/dist-packages
for /usr, its /usr/local/lib/python3.X/dist-packages for /usr/local (both on
its sys.path), <prefix>/lib/python3.X/site-packages anywhere else."""

import sys
import sysconfig

prefix = sys.argv[1].rstrip("/") or "/"
schemes = sysconfig.get_scheme_names()
if prefix == "/usr" and "deb_system" in schemes:
    print(sysconfig.get_path("purelib", "deb_system"))
elif prefix == "/usr/local" and "posix_local" in schemes:
    print(sysconfig.get_path("purelib", "posix_local"))
else:
    print(sysconfig.get_path("purelib", "posix_prefix", vars={"base": prefix, "platbase": prefix}))
