/**
 * The HEAD load generator's process (bundled by run.mjs as dist/bench/head-client.cjs, run by
 * head-load.ts): head-requests.ts's loop on the lines of a prepareSigned file.
 *
 * Usage: head-client.cjs HOST PORT SECONDS CONNECTIONS SIGNED_FILE. Prints one JSON line:
 * {requests, good, bad, seconds}.
 */
import fs from 'node:fs'
import { headRequest, headRequests } from './head-requests'

const [host, port, seconds, connections, file] = process.argv.slice(2) as [string, string, string, string, string]
const requests = fs
  .readFileSync(file, 'utf8')
  .split('\n')
  .filter(Boolean)
  .map((l) => headRequest(host, Number(port), l))
headRequests({ host, port: Number(port), seconds: Number(seconds), connections: Number(connections), requests }).then(
  (r) => process.stdout.write(`${JSON.stringify(r)}\n`),
  (err: unknown) => {
    process.stderr.write(`head-client: ${(err as Error).message}\n`)
    process.exitCode = 1
  },
)
