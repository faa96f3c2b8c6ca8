/** A description of the machine the figures come from. */
import fs from 'node:fs'
import os from 'node:os'

/** The mount holding `dir`: device, filesystem type, and whether the kernel calls it rotational. */
function diskOf(dir: string): string {
  let best = { mount: '', dev: '?', type: '?' }
  for (const line of fs.readFileSync('/proc/mounts', 'utf8').split('\n')) {
    const [dev, mount, type] = line.split(' ')
    if (!dev || !mount || !type) continue
    if ((dir === mount || dir.startsWith(mount.endsWith('/') ? mount : `${mount}/`)) && mount.length >= best.mount.length) best = { mount, dev, type }
  }
  const { blocks, bsize } = fs.statfsSync(dir)
  const size = `${Math.round((blocks * bsize) / 1024 ** 3)} GiB`
  const name = best.dev.replace(/^\/dev\//, '').replace(/p?\d+$/, '')
  const virtio = name.startsWith('vd') ? 'virtio block device' : name.startsWith('nvme') ? 'NVMe' : 'block device'
  return `${best.type} on ${best.dev} (${virtio}, ${size})`
}

export function machine(dir: string) {
  const cpuinfo = fs.existsSync('/proc/cpuinfo') ? fs.readFileSync('/proc/cpuinfo', 'utf8') : ''
  const virtual = /^flags\s*:.*\bhypervisor\b/m.test(cpuinfo)
  return {
    cpu: `${os.cpus()[0]?.model ?? 'unknown CPU'}${virtual ? ' (virtual machine)' : ''}`,
    cores: os.availableParallelism(),
    memoryGiB: Math.round(os.totalmem() / 1024 ** 3),
    disk: diskOf(fs.realpathSync(dir)),
    os: `${os.type()} ${os.release()}`,
    node: process.version,
  }
}
