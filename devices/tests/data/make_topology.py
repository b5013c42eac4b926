#!/usr/bin/env python3
"""Writes dgx-2s-8gpu-2nic.xml: a synthetic hwloc 2.x topology of a 2-socket GPU server.

2 packages x 8 cores x 2 threads (PU os_index core and core+16), one NUMA node per package with
256 GiB, and per package two PCIe host bridges: one with a PCIe switch holding 2 GPUs (NVIDIA
H100 SXM5, 10de:2330) and a ConnectX-7 NIC (15b3:1021, netdev + RDMA OS devices), one with two
root ports holding 2 GPUs. Run it to regenerate the fixture; the output is committed.
"""
import sys

gp = [0]


def gpi():
    gp[0] += 1
    return gp[0]


def mask(bits):
    v = 0
    for b in bits:
        v |= 1 << b
    return "0x%08x" % v


out = []
w = out.append

GPU_TYPE = "0302 [10de:2330] [10de:16c1] a1"
NIC_TYPE = "0200 [15b3:1021] [15b3:0041] 00"
PORT_TYPE = "0604 [8086:352a] [0000:0000] 04"
SWITCH_TYPE = "0604 [1000:c030] [0000:0000] b0"
card = [1]
render = [129]
nic_index = [0]


def gpu(ind, busid):
    w(ind + '<object type="PCIDev" gp_index="%d" pci_busid="%s" pci_type="%s" pci_link_speed="63.015385">'
      % (gpi(), busid, GPU_TYPE))
    w(ind + '  <object type="OSDev" gp_index="%d" name="card%d" osdev_type="1"/>' % (gpi(), card[0]))
    w(ind + '  <object type="OSDev" gp_index="%d" name="renderD%d" osdev_type="1"/>' % (gpi(), render[0]))
    w(ind + '</object>')
    card[0] += 1
    render[0] += 1


def nic(ind, busid):
    i = nic_index[0]
    nic_index[0] += 1
    w(ind + '<object type="PCIDev" gp_index="%d" pci_busid="%s" pci_type="%s" pci_link_speed="31.507692">'
      % (gpi(), busid, NIC_TYPE))
    w(ind + '  <object type="OSDev" gp_index="%d" name="ens%df0np0" osdev_type="2">' % (gpi(), i + 1))
    w(ind + '    <info name="Address" value="B8:3F:D2:0A:%02X:10"/>' % i)
    w(ind + '  </object>')
    w(ind + '  <object type="OSDev" gp_index="%d" name="mlx5_%d" osdev_type="3">' % (gpi(), i))
    w(ind + '    <info name="NodeGUID" value="b83f:d203:000a:%02x10"/>' % i)
    w(ind + '    <info name="SysImageGUID" value="b83f:d203:000a:%02x10"/>' % i)
    w(ind + '    <info name="Port1State" value="4"/>')
    w(ind + '    <info name="Port1LID" value="0x0"/>')
    w(ind + '  </object>')
    w(ind + '</object>')


def bridge(ind, upstream_busid, typ, lo, hi, depth, children):
    w(ind + '<object type="Bridge" gp_index="%d" bridge_type="1-1" depth="%d" bridge_pci="0000:[%02x-%02x]" '
      'pci_busid="%s" pci_type="%s" pci_link_speed="63.015385">' % (gpi(), depth, lo, hi, upstream_busid, typ))
    children(ind + '  ')
    w(ind + '</object>')


def host_bridge(ind, lo, hi, children):
    w(ind + '<object type="Bridge" gp_index="%d" bridge_type="0-1" depth="0" bridge_pci="0000:[%02x-%02x]">'
      % (gpi(), lo, hi))
    children(ind + '  ')
    w(ind + '</object>')


def switch_bridge(ind, root):
    # root port root:01.0 -> switch (root+1):00.0 -> 3 downstream ports on root+2
    r = root

    def downstream(ind2):
        bridge(ind2, "0000:%02x:00.0" % (r + 2), PORT_TYPE, r + 3, r + 3, 3, lambda i: gpu(i, "0000:%02x:00.0" % (r + 3)))
        bridge(ind2, "0000:%02x:01.0" % (r + 2), PORT_TYPE, r + 4, r + 4, 3, lambda i: gpu(i, "0000:%02x:00.0" % (r + 4)))
        bridge(ind2, "0000:%02x:02.0" % (r + 2), PORT_TYPE, r + 5, r + 5, 3, lambda i: nic(i, "0000:%02x:00.0" % (r + 5)))

    def switch(ind1):
        bridge(ind1, "0000:%02x:00.0" % (r + 1), SWITCH_TYPE, r + 2, r + 5, 2, downstream)

    host_bridge(ind, r, r + 5,
                lambda i: bridge(i, "0000:%02x:01.0" % r, PORT_TYPE, r + 1, r + 5, 1, switch))


def two_gpu_bridge(ind, root):
    r = root

    def ports(i):
        bridge(i, "0000:%02x:01.0" % r, PORT_TYPE, r + 1, r + 1, 1, lambda j: gpu(j, "0000:%02x:00.0" % (r + 1)))
        bridge(i, "0000:%02x:02.0" % r, PORT_TYPE, r + 2, r + 2, 1, lambda j: gpu(j, "0000:%02x:00.0" % (r + 2)))

    host_bridge(ind, r, r + 2, ports)


all_pus = list(range(32))
w('<?xml version="1.0" encoding="UTF-8"?>')
w('<!DOCTYPE topology SYSTEM "hwloc2.dtd">')
w('<topology version="2.0">')
w('  <object type="Machine" os_index="0" cpuset="%s" complete_cpuset="%s" allowed_cpuset="%s" '
  'nodeset="0x00000003" complete_nodeset="0x00000003" allowed_nodeset="0x00000003" gp_index="%d">'
  % (mask(all_pus), mask(all_pus), mask(all_pus), gpi()))
w('    <info name="Backend" value="Linux"/>')
w('    <info name="OSName" value="Linux"/>')
w('    <info name="HostName" value="gpu-node-a"/>')
w('    <info name="Architecture" value="x86_64"/>')
w('    <info name="hwlocVersion" value="2.9.0"/>')
for p in range(2):
    pus = [c for c in range(p * 8, p * 8 + 8)] + [c + 16 for c in range(p * 8, p * 8 + 8)]
    nodeset = "0x%08x" % (1 << p)
    common = 'cpuset="%s" complete_cpuset="%s" nodeset="%s" complete_nodeset="%s"' % (mask(pus), mask(pus), nodeset, nodeset)
    w('    <object type="Package" os_index="%d" %s gp_index="%d">' % (p, common, gpi()))
    w('      <info name="CPUVendor" value="GenuineIntel"/>')
    w('      <info name="CPUModel" value="Intel(R) Xeon(R) Platinum 8480C"/>')
    w('      <object type="NUMANode" os_index="%d" %s gp_index="%d" local_memory="274877906944">' % (p, common, gpi()))
    w('        <page_type size="4096" count="67108864"/>')
    w('        <page_type size="2097152" count="0"/>')
    w('      </object>')
    w('      <object type="L3Cache" os_index="%d" %s gp_index="%d" cache_size="110100480" depth="3" '
      'cache_linesize="64" cache_associativity="15" cache_type="0">' % (p, common, gpi()))
    for c in range(p * 8, p * 8 + 8):
        cset = mask([c, c + 16])
        cc = 'cpuset="%s" complete_cpuset="%s" nodeset="%s" complete_nodeset="%s"' % (cset, cset, nodeset, nodeset)
        w('        <object type="Core" os_index="%d" %s gp_index="%d">' % (c, cc, gpi()))
        for t in (c, c + 16):
            tset = mask([t])
            tc = 'cpuset="%s" complete_cpuset="%s" nodeset="%s" complete_nodeset="%s"' % (tset, tset, nodeset, nodeset)
            w('          <object type="PU" os_index="%d" %s gp_index="%d"/>' % (t, tc, gpi()))
        w('        </object>')
    w('      </object>')
    if p == 0:
        switch_bridge('      ', 0x15)
        two_gpu_bridge('      ', 0x38)
    else:
        switch_bridge('      ', 0x97)
        two_gpu_bridge('      ', 0xb7)
    w('    </object>')
w('  </object>')
w('</topology>')
sys.stdout.write("\n".join(out) + "\n")
