package netns

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A binary linking this package becomes CreateHostView's child when started under
// viewChildArg0: package init runs before any main, so rocelab, the lab process and
// test binaries all can.
func init() {
	if len(os.Args) == 0 || os.Args[0] != viewChildArg0 {
		return
	}
	if err := runViewChild(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runViewChild runs in fresh mount and UTS namespaces, in the host's network namespace:
// it builds the host's view, says "ready" and stays until its stdin closes.
func runViewChild(stdin io.Reader, stdout io.Writer) error {
	in := bufio.NewReader(stdin)
	var cfg viewConfig
	if err := json.NewDecoder(in).Decode(&cfg); err != nil {
		return fmt.Errorf("view config: %w", err)
	}
	if err := buildView(cfg); err != nil {
		return err
	}
	if _, err := io.WriteString(stdout, "ready\n"); err != nil {
		return err
	}
	_, err := io.Copy(io.Discard, in)
	return err
}

// devMajor numbers /dev/infiniband's nodes: a major of Linux's "local/experimental
// use" range (Documentation/admin-guide/devices.txt), which the kernel never assigns
// dynamically, so no driver answers and open(2) fails with ENXIO, as it does for these
// nodes on a machine whose ib_uverbs and rdma_ucm modules are not loaded. Nothing of
// rocelab opens them (the drop-in libraries talk to the verbs service); UCX only checks
// that uverbsN is a character device it may read and write. A node that opened
// (/dev/null's numbers) would let the system's librdmacm, used when rocelab's is not
// on the library path, take the void's silence for the kernel's answers: UCX's
// ucx_info -d hung in it. The kernel's own numbers (231:192, 10:N) would reach the
// machine's real RNIC, if it has one, from inside the host.
const devMajor = 120

// uverbsDev is /dev/infiniband/uverbsN's number (the kernel's minor is 192+N too);
// rdmaCMDev is rdma_cm's.
func uverbsDev(n int) uint64 { return unix.Mkdev(devMajor, uint32(192+n)) }

var rdmaCMDev = unix.Mkdev(devMajor, 0)

func buildView(cfg viewConfig) error {
	// Slave: the machine's unmounts (a lab's namespaces going away) still reach the
	// host's copy of the tree; nothing mounted here goes back.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make / a slave mount: %w", err)
	}
	// The copy of ViewDir holds other hosts' UTS pins; a tmpfs over it carries this
	// host's files instead.
	_ = unix.Unmount(ViewDir, unix.MNT_DETACH)
	if err := unix.Mount("rocelab-view", ViewDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755"); err != nil {
		return fmt.Errorf("tmpfs on %s: %w", ViewDir, err)
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return fmt.Errorf("sethostname %q: %w", cfg.Hostname, err)
	}
	// A sysfs of the host's network namespace, as `ip netns exec` mounts it: its
	// class/net lists the host's netdevs.
	if err := unix.Unmount("/sys", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount /sys: %w", err)
	}
	if err := unix.Mount("sysfs", "/sys", "sysfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount sysfs: %w", err)
	}
	class, dev := filepath.Join(ViewDir, "class"), filepath.Join(ViewDir, "dev")
	if err := writeRDMAFiles(class, dev, cfg); err != nil {
		return err
	}
	// Read-only overlays add the RDMA entries to sysfs's class directory and to
	// /dev; everything else shows through unchanged.
	if err := overlay(class, "/sys/class", "/sys/class"); err != nil {
		return err
	}
	if err := overlayDev(dev); err != nil {
		return err
	}
	if cfg.Hosts != "" {
		if err := unix.Mount(cfg.Hosts, "/etc/hosts", "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s on /etc/hosts: %w", cfg.Hosts, err)
		}
	}
	return nil
}

func overlay(upper, lower, target string) error {
	if err := unix.Mount("overlay", target, "overlay", unix.MS_RDONLY, "lowerdir="+upper+":"+lower); err != nil {
		return fmt.Errorf("overlay %s on %s: %w", upper, target, err)
	}
	return nil
}

// overlayDev puts the overlay of /dev together beside /dev, moves /dev's submounts
// (pts, shm, mqueue, hugepages) onto it, then moves it over /dev: an overlay has only
// its lower directory's files, not the mounts on them.
func overlayDev(upper string) error {
	stage := filepath.Join(ViewDir, "devroot")
	if err := os.Mkdir(stage, 0o755); err != nil {
		return err
	}
	if err := overlay(upper, "/dev", stage); err != nil {
		return err
	}
	subs, err := submounts("/dev")
	if err != nil {
		return err
	}
	for _, s := range subs {
		to := filepath.Join(stage, strings.TrimPrefix(s, "/dev/"))
		if err := unix.Mount(s, to, "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("move %s to %s: %w", s, to, err)
		}
	}
	if err := unix.Mount(stage, "/dev", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move %s to /dev: %w", stage, err)
	}
	return nil
}

// submounts lists the mount points of the mounts directly on the top mount at dir.
func submounts(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	type mnt struct{ id, parent, point string }
	var mounts []mnt
	top := ""
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		m := mnt{id: f[0], parent: f[1], point: unescapeMountinfo(f[4])}
		mounts = append(mounts, m)
		if m.point == dir {
			top = m.id // the last one listed is on top
		}
	}
	if top == "" {
		return nil, fmt.Errorf("%s is not a mount point", dir)
	}
	var subs []string
	for _, m := range mounts {
		if m.parent == top && m.point != dir {
			subs = append(subs, m.point)
		}
	}
	return subs, nil
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// writeRDMAFiles lays out the devices' sysfs entries under class (infiniband/,
// infiniband_verbs/) and their device nodes under dev (infiniband/), with the contents
// and formats of the kernel's drivers/infiniband/core/sysfs.c for an rxe device.
func writeRDMAFiles(class, dev string, cfg viewConfig) error {
	var w fileWriter
	w.file(filepath.Join(class, "infiniband_verbs", "abi_version"), "6") // IB_USER_VERBS_ABI_VERSION
	w.mkdir(filepath.Join(dev, "infiniband"))
	w.mknod(filepath.Join(dev, "infiniband", "rdma_cm"), rdmaCMDev)
	for i, d := range cfg.Devices {
		ib := filepath.Join(class, "infiniband", d.Name)
		w.file(filepath.Join(ib, "node_type"), "1: CA")
		w.file(filepath.Join(ib, "node_guid"), guidString(d.NodeGUID))
		w.file(filepath.Join(ib, "sys_image_guid"), guidString(d.NodeGUID))
		w.file(filepath.Join(ib, "fw_ver"), d.FWVer)
		w.file(filepath.Join(ib, "node_desc"), d.Name)
		w.file(filepath.Join(ib, "parent"), d.Netdev) // rxe's: the netdev it runs on
		// device/net/<netdev>: the netdev's own directory in the host's sysfs, where
		// pyverbs and rdma-core's tests look for a device's interface.
		if target, err := os.Readlink(filepath.Join("/sys/class/net", d.Netdev)); err != nil {
			w.err = errors.Join(w.err, fmt.Errorf("netdev %s: %w", d.Netdev, err))
		} else {
			// target is relative to /sys/class/net, four levels above device/net.
			w.symlink(filepath.Join(ib, "device", "net", d.Netdev), filepath.Join("../../../..", "net", target))
		}
		port := filepath.Join(ib, "ports", "1")
		state, phys := "4: ACTIVE", "5: LinkUp"
		if !d.Active {
			state, phys = "1: DOWN", "3: Disabled"
		}
		w.file(filepath.Join(port, "state"), state)
		w.file(filepath.Join(port, "phys_state"), phys)
		w.file(filepath.Join(port, "link_layer"), "Ethernet")
		w.file(filepath.Join(port, "rate"), rateString(d.Rate))
		w.file(filepath.Join(port, "lid"), "0x0")
		w.file(filepath.Join(port, "sm_lid"), "0x0")
		w.file(filepath.Join(port, "lid_mask_count"), "0")
		w.file(filepath.Join(port, "sm_sl"), "0")
		w.file(filepath.Join(port, "cap_mask"), "0x04010000") // IP_BASED_GIDS | CM_SUP, as ibv_query_port
		for n, g := range d.GIDs {
			idx := strconv.Itoa(n)
			w.file(filepath.Join(port, "gids", idx), gidString(g.GID))
			w.file(filepath.Join(port, "gid_attrs", "types", idx), g.Type)
			w.file(filepath.Join(port, "gid_attrs", "ndevs", idx), d.Netdev)
		}
		for n := range d.PKeys {
			pkey := "0x0000"
			if n == 0 {
				pkey = "0xffff"
			}
			w.file(filepath.Join(port, "pkeys", strconv.Itoa(n)), pkey)
		}
		uverbs := "uverbs" + strconv.Itoa(i)
		uv := filepath.Join(class, "infiniband_verbs", uverbs)
		w.file(filepath.Join(uv, "ibdev"), d.Name)
		w.file(filepath.Join(uv, "abi_version"), "2") // rxe's uverbs ABI
		w.file(filepath.Join(uv, "dev"), fmt.Sprintf("%d:%d", unix.Major(uverbsDev(i)), unix.Minor(uverbsDev(i))))
		w.symlink(filepath.Join(uv, "device"), filepath.Join("../../infiniband", d.Name, "device"))
		w.mknod(filepath.Join(dev, "infiniband", uverbs), uverbsDev(i))
	}
	return w.err
}

// fileWriter writes a tree, keeping the first error.
type fileWriter struct{ err error }

func (w *fileWriter) mkdir(dir string) {
	if w.err == nil {
		w.err = os.MkdirAll(dir, 0o755)
	}
}

func (w *fileWriter) file(path, line string) {
	w.mkdir(filepath.Dir(path))
	if w.err == nil {
		w.err = os.WriteFile(path, []byte(line+"\n"), 0o444)
	}
}

func (w *fileWriter) symlink(path, target string) {
	w.mkdir(filepath.Dir(path))
	if w.err == nil {
		w.err = os.Symlink(target, path)
	}
}

// mknod makes a character device node that every user may open, as rdma-core's udev
// rules make /dev/infiniband's.
func (w *fileWriter) mknod(path string, dev uint64) {
	if w.err != nil {
		return
	}
	err := unix.Mknod(path, unix.S_IFCHR|0o666, int(dev))
	if err == nil {
		err = os.Chmod(path, 0o666) // whatever the umask
	}
	if err != nil {
		w.err = fmt.Errorf("mknod %s: %w", path, err)
	}
}

// guidString formats a GUID as sysfs's node_guid: four groups of four hex digits.
func guidString(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff)
}

// gidString formats a GID as the kernel's %pI6: eight groups of four hex digits.
func gidString(g [16]byte) string {
	parts := make([]string, 8)
	for i := range parts {
		parts[i] = fmt.Sprintf("%02x%02x", g[2*i], g[2*i+1])
	}
	return strings.Join(parts, ":")
}

// rateString is ports/N/rate for a link of rate bit/s: the IB speed and width that the
// drop-in libibverbs reports for it (libibverbs/device.c speed_width: the largest
// speed×width not above the rate), formatted as the kernel's rate_show.
func rateString(rate uint64) string {
	speeds := []struct {
		name string
		deci int // deci-Gb/s per lane
	}{{"", 25}, {" DDR", 50}, {" QDR", 100}, {" EDR", 250}, {" HDR", 500}, {" NDR", 1000}}
	widths := []int{1, 2, 4, 8, 12}
	best, bs, bw := 0, 0, 1
	mbps := int(min(rate/1_000_000, 1<<40))
	for s, sp := range speeds {
		for _, wd := range widths {
			if p := sp.deci * 100 * wd; p <= mbps && p > best {
				best, bs, bw = p, s, wd
			}
		}
	}
	r := speeds[bs].deci * bw
	half := ""
	if r%10 != 0 {
		half = ".5"
	}
	return fmt.Sprintf("%d%s Gb/sec (%dX%s)", r/10, half, bw, speeds[bs].name)
}
