// tap `before` script: start every run with an empty log mirror, and the shared Ceph gateway the
// S3 blob store tests use (once per run, not per test file: test/s3/fixture.ts).
import fs from 'node:fs'
import { TEST_LOG_DIR } from './secrets'
import { startFixtureForRun } from '../s3/fixture'

fs.rmSync(TEST_LOG_DIR, { recursive: true, force: true })
fs.mkdirSync(TEST_LOG_DIR, { recursive: true })
startFixtureForRun()
