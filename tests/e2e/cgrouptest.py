"""Cgroups for the tests of the defaults servd and servd-pack take from them
(test_pack_cgroup, test_server_cgroup): made below this process's own cgroup, in the v1
hierarchy of a controller or in the v2 one, where this process may make them (root)."""
import os


def make(controller, v1_limits, v2_limits, child=False):
    """A new cgroup below this process's own, with the limits written into its files
    (v1_limits or v2_limits: [(file, value)], in that order), and with child=True a
    child of it without limits (a limit on a parent must count too). Returns (the
    directories made, outermost first; the cgroup.procs to write a pid into), or (None,
    why not)."""
    with open("/proc/self/cgroup") as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    name = "servd-test-%d" % os.getpid()
    why = "no %s controller" % controller
    for _, controllers, path in lines:
        v1 = controller in controllers.split(",")
        if not v1 and controllers:
            continue
        root = "/sys/fs/cgroup/" + controller if v1 else "/sys/fs/cgroup"
        # a container sees its own cgroup at the root of the mount
        parent = root + path if os.path.isdir(root + path) else root
        if not os.path.exists(os.path.join(parent, "cgroup.procs")):
            # not a cgroup file system: a hybrid host's /sys/fs/cgroup is a tmpfs, and
            # the programs read v2's files only at the top of /sys/fs/cgroup
            why = "%s is not a cgroup" % parent
            continue
        d = os.path.join(parent, name)
        try:
            os.mkdir(d)
        except OSError as e:
            why = "cannot make a cgroup in %s: %s" % (parent, e)
            continue
        dirs = [d]
        try:
            for file, value in v1_limits if v1 else v2_limits:
                with open(os.path.join(d, file), "w") as f:
                    f.write(value)
            if child:
                if not v1:  # the child's processes need the controller enabled below d
                    with open(os.path.join(d, "cgroup.subtree_control"), "w") as f:
                        f.write("+" + controller)
                dirs.append(os.path.join(d, "inner"))
                os.mkdir(dirs[-1])
        except OSError as e:
            remove(dirs)
            why = "cannot set a %s limit in %s: %s" % (controller, d, e)
            continue
        return dirs, os.path.join(dirs[-1], "cgroup.procs")
    return None, why


def remove(dirs):
    """Removes the cgroups make() made, innermost first."""
    for d in reversed(dirs):
        try:
            os.rmdir(d)
        except OSError as e:
            print("cannot remove the cgroup %s: %s" % (d, e))


def enter(procs):
    """A preexec_fn that moves the child into the cgroup of procs."""
    def move():
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
    return move
