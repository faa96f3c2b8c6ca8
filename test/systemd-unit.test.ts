// @suites: sqlite
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { loadConfig } from '../src/config'
import { ROOT } from './process-helper'
import { tempDir } from './helper'

const UNIT = path.join(ROOT, 'scripts', 'coffer.service')

/** The unit's [Service] settings; a key given several times keeps every value. */
function serviceSettings(text: string): Map<string, string[]> {
  const out = new Map<string, string[]>()
  let section = ''
  for (const raw of text.split('\n')) {
    const line = raw.trim()
    if (line === '' || line.startsWith('#')) continue
    const header = /^\[(.+)\]$/.exec(line)
    if (header) section = header[1]!
    else if (section === 'Service') {
      const eq = line.indexOf('=')
      const key = line.slice(0, eq)
      out.set(key, [...(out.get(key) ?? []), line.slice(eq + 1)])
    }
  }
  return out
}

t.test('scripts/coffer.service: dedicated user, state directory, sandbox, restart on failure', async (t) => {
  const s = serviceSettings(fs.readFileSync(UNIT, 'utf8'))
  const one = (key: string) => s.get(key)?.at(-1)
  t.equal(one('User'), 'coffer')
  t.equal(one('StateDirectory'), 'coffer')
  t.ok(s.get('Environment')?.includes('COFFER_DATA_DIR=%S/coffer'), 'the data dir is the state directory')
  t.equal(one('ExecStart'), '/usr/local/bin/coffer serve')
  t.equal(one('Restart'), 'on-failure')
  t.equal(one('RestartPreventExitStatus'), '2', 'a configuration error (exit 2) is not restarted in a loop')
  t.equal(one('KillSignal'), 'SIGTERM')
  const stopSeconds = Number(one('TimeoutStopSec'))
  t.ok(stopSeconds > loadConfig({}).shutdownTimeoutSeconds, 'systemd waits longer than the graceful shutdown bound')
  for (const [key, value] of [
    ['NoNewPrivileges', 'yes'],
    ['ProtectSystem', 'strict'],
    ['ProtectHome', 'yes'],
    ['PrivateTmp', 'yes'],
    ['PrivateDevices', 'yes'],
    ['CapabilityBoundingSet', ''],
    ['RestrictAddressFamilies', 'AF_INET AF_INET6 AF_UNIX'],
    ['SystemCallFilter', '@system-service'],
  ]) {
    t.equal(one(key!), value, `${key}=${value}`)
  }
  t.notOk(s.has('MemoryDenyWriteExecute'), 'V8 needs W^X exceptions for its JIT: setting it would abort Node')
})

t.test(
  'systemd-analyze verify accepts the unit',
  { skip: spawnSync('systemd-analyze', ['--version']).status === 0 ? false : 'systemd-analyze is not installed' },
  async (t) => {
    const dir = tempDir(t)
    // verify insists that ExecStart exists: point it at a real executable.
    const exe = path.join(dir, 'coffer')
    fs.writeFileSync(exe, '#!/bin/sh\n', { mode: 0o755 })
    const unit = path.join(dir, 'coffer.service')
    fs.writeFileSync(unit, fs.readFileSync(UNIT, 'utf8').replaceAll('/usr/local/bin/coffer', exe))
    const r = spawnSync('systemd-analyze', ['verify', unit], { encoding: 'utf8', cwd: dir, timeout: 30_000 })
    t.equal(r.status, 0, r.stderr)
    t.equal(r.stderr.trim(), '', 'no warnings')
  },
)
