package jail

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// systemDirs are bound read-only from the host (or recreated as the same
// symlink, on merged-/usr systems) so programs can run.
var systemDirs = []string{"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// etcEntries are the only host /etc entries a sandbox sees, bound
// read-only. Left out on purpose: shadow, sudoers, ssh keys, machine-id,
// hostname, environment, fstab, crontabs and the rest. passwd, group, hosts,
// hostname and resolv.conf (without network) are written fresh.
var etcEntries = []string{
	"nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"ssl", "ca-certificates", "ca-certificates.conf", "pki", "crypto-policies",
	"alternatives", "localtime", "timezone", "profile", "profile.d", "bash.bashrc",
	"inputrc", "mime.types", "protocols", "services", "os-release", "lsb-release",
	"debian_version", "gai.conf", "host.conf", "locale.alias", "terminfo",
	"python3", "gitconfig", "vim", "nanorc", "magic", "mailcap",
}

// devNodes are bound from the host's /dev.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// newRootAt is where the sandbox's root tmpfs is built before pivot_root.
// It is a directory every host has; the mount only exists in the jail's
// mount namespace.
const newRootAt = "/tmp"

// buildRoot builds the sandbox's file system in a fresh tmpfs and makes it
// the root: system dirs and a few /etc files read-only from the host,
// /home/user and /tmp from the sandbox's directory, fresh /proc and /dev.
func buildRoot(cfg initConfig) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	root := newRootAt
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=16m,nr_inodes=4096"); err != nil {
		return fmt.Errorf("mount root tmpfs: %w", err)
	}
	at := func(p string) string { return filepath.Join(root, p) }

	for _, d := range systemDirs {
		host := "/" + d
		fi, err := os.Lstat(host)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(host)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, at(d)); err != nil {
				return err
			}
			continue
		}
		if err := bindReadOnly(host, at(d), true); err != nil {
			return err
		}
	}

	if err := os.Mkdir(at("etc"), 0o755); err != nil {
		return err
	}
	for _, e := range etcEntries {
		host := filepath.Join("/etc", e)
		fi, err := os.Stat(host) // follow: bind what the link points at
		if err != nil {
			continue
		}
		if err := bindReadOnly(host, at("etc/"+e), fi.IsDir()); err != nil {
			return err
		}
	}
	files := map[string]string{
		"passwd": "root:x:0:0:root:/root:/usr/sbin/nologin\n" +
			UserName + ":x:" + strconv.Itoa(UserID) + ":" + strconv.Itoa(UserID) + "::" + HomeDir + ":/bin/bash\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"group":    "root:x:0:\n" + UserName + ":x:" + strconv.Itoa(UserID) + ":\n" + "nogroup:x:65534:\n",
		"hosts":    "127.0.0.1\tlocalhost " + cfg.Hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		"hostname": cfg.Hostname + "\n",
	}
	if cfg.Network == NetworkNone {
		files["resolv.conf"] = "# no network in this sandbox\n"
	} else if _, err := os.Stat("/etc/resolv.conf"); err == nil {
		if err := bindReadOnly("/etc/resolv.conf", at("etc/resolv.conf"), false); err != nil {
			return err
		}
	}
	for name, content := range files {
		if err := os.WriteFile(at("etc/"+name), []byte(content), 0o644); err != nil {
			return err
		}
	}

	// The working directory is the sandbox's Dir (the holder's, inherited).
	for _, d := range []struct{ src, path string }{{"home", "home/user"}, {"tmp", "tmp"}} {
		if err := os.MkdirAll(at(d.path), 0o755); err != nil {
			return err
		}
		// Open without following a symlink, then bind the descriptor:
		// whatever Dir/home is, a link elsewhere is never mounted.
		fd, err := unix.Open(d.src, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open the sandbox's %s: %w", d.src, err)
		}
		err = unix.Mount("/proc/self/fd/"+strconv.Itoa(fd), at(d.path), "", unix.MS_BIND, "")
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("bind %s: %w", d.path, err)
		}
		if err := setAttr(at(d.path), unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, false); err != nil {
			return fmt.Errorf("bind %s: %w", d.path, err)
		}
	}
	if err := os.MkdirAll(at("var"), 0o755); err != nil {
		return err
	}
	if err := os.Symlink("/tmp", at("var/tmp")); err != nil {
		return err
	}

	if err := os.Mkdir(at("proc"), 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", at("proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if err := buildDev(at("dev"), cfg.Limits.MemoryBytes); err != nil {
		return err
	}

	// Swap roots and drop the host's.
	if err := os.Chdir(root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach host root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("make / read-only: %w", err)
	}
	if err := unix.Mount("", "/dev", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("make /dev read-only: %w", err)
	}
	return nil
}

// buildDev makes a minimal /dev: host device nodes bound in, a private
// devpts, a bounded /dev/shm and the usual symlinks.
func buildDev(dev string, shmBytes int64) error {
	if err := os.Mkdir(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, n := range devNodes {
		p := filepath.Join(dev, n)
		if err := os.WriteFile(p, nil, 0o666); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+n, p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", n, err)
		}
		_ = setAttr(p, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, false)
	}
	if err := os.Mkdir(filepath.Join(dev, "pts"), 0o755); err != nil {
		return err
	}
	if err := unix.Mount("devpts", filepath.Join(dev, "pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("mount /dev/pts: %w", err)
	}
	if err := os.Mkdir(filepath.Join(dev, "shm"), 0o1777); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=1777,size="+strconv.FormatInt(shmBytes, 10)); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	for name, target := range map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	return nil
}

// bindReadOnly bind-mounts host onto target (created as a file or directory)
// read-only, nosuid and nodev, recursively for directories.
func bindReadOnly(host, target string, dir bool) error {
	if dir {
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
	} else {
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(target, nil, 0o644); err != nil {
			return err
		}
	}
	flags := uintptr(unix.MS_BIND)
	if dir {
		flags |= unix.MS_REC
	}
	if err := unix.Mount(host, target, "", flags, ""); err != nil {
		return fmt.Errorf("bind %s: %w", host, err)
	}
	if err := setAttr(target, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, dir); err != nil {
		return fmt.Errorf("bind %s read-only: %w", host, err)
	}
	return nil
}

// setAttr adds mount attributes to the mount at target (and every mount
// beneath it if recursive), keeping the ones it has. It uses
// mount_setattr(2) and falls back to a bind remount on kernels before 5.12.
func setAttr(target string, attr uint64, recursive bool) error {
	flags := uint(unix.AT_SYMLINK_NOFOLLOW)
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	err := unix.MountSetattr(-1, target, flags, &unix.MountAttr{Attr_set: attr})
	if err != unix.ENOSYS {
		return err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(target, &st); err != nil {
		return err
	}
	mflags := uintptr(unix.MS_REMOUNT | unix.MS_BIND)
	for _, m := range []struct {
		st int64
		ms uintptr
	}{{unix.ST_RDONLY, unix.MS_RDONLY}, {unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV},
		{unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME},
		{unix.ST_RELATIME, unix.MS_RELATIME}} {
		if int64(st.Flags)&m.st != 0 {
			mflags |= m.ms
		}
	}
	if attr&unix.MOUNT_ATTR_RDONLY != 0 {
		mflags |= unix.MS_RDONLY
	}
	if attr&unix.MOUNT_ATTR_NOSUID != 0 {
		mflags |= unix.MS_NOSUID
	}
	if attr&unix.MOUNT_ATTR_NODEV != 0 {
		mflags |= unix.MS_NODEV
	}
	if attr&unix.MOUNT_ATTR_NOEXEC != 0 {
		mflags |= unix.MS_NOEXEC
	}
	return unix.Mount("", target, "", mflags, "")
}

// loopbackUp brings up lo in the jail's fresh network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
