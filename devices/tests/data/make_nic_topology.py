#!/usr/bin/env python3
"""Writes nic-1s-8port.xml: a synthetic hwloc 2.x topology of a single-socket NIC-heavy server.

1 package, 12 cores without SMT, 1 NUMA node of 128 GiB, 4 PCIe host bridges each with one root
port holding a dual-port Intel E810-C (8086:1592, functions .0 and .1, netdevs ens<N>f0/ens<N>f1),
and one host bridge with a VGA BMC controller (ASPEED 1a03:2000) that is a GPU by class but tiny.
No SR-IOV VFs: hwloc XML does not record PF/VF relations; tests create VFs through the fake sysfs.
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
pus = list(range(12))
common = 'cpuset="%s" complete_cpuset="%s" nodeset="0x00000001" complete_nodeset="0x00000001"' % (mask(pus), mask(pus))
w('<?xml version="1.0" encoding="UTF-8"?>')
w('<!DOCTYPE topology SYSTEM "hwloc2.dtd">')
w('<topology version="2.0">')
w('  <object type="Machine" os_index="0" %s allowed_cpuset="%s" allowed_nodeset="0x00000001" gp_index="%d">' % (common, mask(pus), gpi()))
w('    <info name="Backend" value="Linux"/>')
w('    <info name="HostName" value="nic-node-b"/>')
w('    <info name="Architecture" value="x86_64"/>')
w('    <object type="Package" os_index="0" %s gp_index="%d">' % (common, gpi()))
w('      <info name="CPUModel" value="Intel(R) Xeon(R) Gold 6338N CPU"/>')
w('      <object type="NUMANode" os_index="0" %s gp_index="%d" local_memory="137438953472"/>' % (common, gpi()))
w('      <object type="L3Cache" os_index="0" %s gp_index="%d" cache_size="50331648" depth="3" cache_linesize="64" cache_associativity="12" cache_type="0">' % (common, gpi()))
for c in range(12):
    cs = 'cpuset="%s" complete_cpuset="%s" nodeset="0x00000001" complete_nodeset="0x00000001"' % (mask([c]), mask([c]))
    w('        <object type="Core" os_index="%d" %s gp_index="%d">' % (c, cs, gpi()))
    w('          <object type="PU" os_index="%d" %s gp_index="%d"/>' % (c, cs, gpi()))
    w('        </object>')
w('      </object>')
for n, root in enumerate([0x17, 0x31, 0x4b, 0x65]):
    w('      <object type="Bridge" gp_index="%d" bridge_type="0-1" depth="0" bridge_pci="0000:[%02x-%02x]">' % (gpi(), root, root + 1))
    w('        <object type="Bridge" gp_index="%d" bridge_type="1-1" depth="1" bridge_pci="0000:[%02x-%02x]" '
      'pci_busid="0000:%02x:02.0" pci_type="0604 [8086:347a] [0000:0000] 04" pci_link_speed="15.753846">' % (gpi(), root + 1, root + 1, root))
    for f in range(2):
        w('          <object type="PCIDev" gp_index="%d" pci_busid="0000:%02x:00.%d" pci_type="0200 [8086:1592] [8086:0002] 02" pci_link_speed="15.753846">' % (gpi(), root + 1, f))
        w('            <object type="OSDev" gp_index="%d" name="ens%df%d" osdev_type="2">' % (gpi(), n + 1, f))
        w('              <info name="Address" value="40:a6:b7:%02x:%02x:%02x"/>' % (n, f, 0x10 + n * 2 + f))
        w('            </object>')
        w('          </object>')
    w('        </object>')
    w('      </object>')
w('      <object type="Bridge" gp_index="%d" bridge_type="0-1" depth="0" bridge_pci="0000:[02-03]">' % gpi())
w('        <object type="Bridge" gp_index="%d" bridge_type="1-1" depth="1" bridge_pci="0000:[03-03]" '
  'pci_busid="0000:02:00.0" pci_type="0604 [1a03:1150] [1a03:1150] 04" pci_link_speed="0.250000">' % gpi())
w('          <object type="PCIDev" gp_index="%d" pci_busid="0000:03:00.0" pci_type="0300 [1a03:2000] [15d9:1c48] 41" pci_link_speed="0.250000">' % gpi())
w('            <object type="OSDev" gp_index="%d" name="card0" osdev_type="1"/>' % gpi())
w('          </object>')
w('        </object>')
w('      </object>')
w('    </object>')
w('  </object>')
w('</topology>')
sys.stdout.write("\n".join(out) + "\n")
