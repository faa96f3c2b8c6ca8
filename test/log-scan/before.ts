// tap `before` script: start every run with an empty log mirror.
import fs from 'node:fs'
import { TEST_LOG_DIR } from './secrets'

fs.rmSync(TEST_LOG_DIR, { recursive: true, force: true })
fs.mkdirSync(TEST_LOG_DIR, { recursive: true })
