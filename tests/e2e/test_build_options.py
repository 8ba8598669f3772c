"""The build's options, configured afresh: -DSERVD_BUILD_SERVD=OFF builds servd-pack alone
on a machine without libuv (only servd uses it), as the option says."""
import os
import shutil
import subprocess

import servdtest as st


def pc_dirs():
    """pkg-config's own search path (the multiarch and the shared .pc directories)."""
    p = subprocess.run(["pkg-config", "--variable", "pc_path", "pkg-config"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=30)
    return [d for d in p.stdout.decode().strip().split(":") if os.path.isdir(d)]


def test_servd_pack_alone_configures_without_libuv():
    if not shutil.which("cmake") or not shutil.which("pkg-config"):
        raise st.Skip("cmake or pkg-config missing")
    work = st.tmpdir()
    # every .pc file pkg-config finds here but libuv's: a machine without libuv1-dev
    pc = os.path.join(work, "pc-without-libuv")
    os.makedirs(pc)
    for d in pc_dirs():
        for name in os.listdir(d):
            if name.endswith(".pc") and not name.startswith("libuv") and \
                    not os.path.lexists(os.path.join(pc, name)):
                os.symlink(os.path.join(d, name), os.path.join(pc, name))
    env = dict(os.environ, PKG_CONFIG_LIBDIR=pc)

    def found(module):
        return subprocess.run(["pkg-config", "--exists", module], env=env).returncode == 0
    st.ok(not found("libuv") and found("lmdb") and found("libzstd"),
          "the .pc directory hides libuv, not the other libraries")
    build = os.path.join(work, "build")
    p = subprocess.run(["cmake", "-S", st.SOURCE_DIR, "-B", build, "-DSERVD_BUILD_SERVD=OFF"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=240)
    st.eq(p.returncode, 0, "configure with -DSERVD_BUILD_SERVD=OFF and no libuv: %s"
          % p.stderr.decode(errors="replace")[-1500:])
    p = subprocess.run(["cmake", "--build", build, "--target", "help"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    targets = [line.split()[-1] for line in p.stdout.decode().splitlines() if line.startswith("...")]
    st.ok("servd-pack" in targets and "servd" not in targets,
          "servd-pack and not servd among the targets: %s" % targets)


if __name__ == "__main__":
    st.run([test_servd_pack_alone_configures_without_libuv])
