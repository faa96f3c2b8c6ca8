// One node's start, as far as the schema goes: test/pg-migrate.test.ts runs three of these at
// once. Each connects, says "ready", waits for a line on stdin (so that all three migrate at the
// same moment, not one after another as they happen to finish starting), migrates, and prints the
// versions it applied as JSON.
import fs from 'node:fs'
import { PgBridge } from '../../src/db/pg/bridge'
import { migratePg } from '../../src/db/pg/migrate'

const bridge = new PgBridge({ url: process.argv[2]! })
try {
  bridge.query('SELECT 1')
  process.stdout.write('ready\n')
  fs.readSync(0, Buffer.alloc(1))
  process.stdout.write(JSON.stringify(migratePg(bridge)) + '\n')
} finally {
  bridge.close()
}
