/** Files at least this large show progress, when stderr is a terminal. */
export const PROGRESS_MIN_BYTES = 1024 * 1024

const mib = (n: number) => (n / 1024 / 1024).toFixed(1)

/**
 * A one-line progress display on a terminal (`\r`-rewritten, at most ten times a second); a no-op
 * elsewhere, so logs and pipes get no control characters.
 */
export function progress(stream: NodeJS.WritableStream & { isTTY?: boolean }, label: string, total: number, now: () => number = Date.now) {
  const enabled = stream.isTTY === true && total >= PROGRESS_MIN_BYTES
  const started = now()
  let done = 0
  let shownAt = -Infinity
  const show = () => {
    const seconds = Math.max((now() - started) / 1000, 0.001)
    const pct = total === 0 ? 100 : Math.floor((done / total) * 100)
    stream.write(`\r${label}  ${String(pct).padStart(3)}%  ${mib(done)}/${mib(total)} MiB  ${mib(done / seconds)} MiB/s\x1b[K`)
  }
  return {
    add(bytes: number): void {
      done += bytes
      if (!enabled || now() - shownAt < 100) return
      shownAt = now()
      show()
    },
    end(): void {
      if (!enabled) return
      show()
      stream.write('\n')
    },
  }
}
