import type { Metric, Registry } from 'prom-client'

type Labels = { method: string; route: string; status_code: string }

/** One (method, route, status) series: its count, the sum of its durations, and its per-bucket counts. */
interface Series {
  labels: Labels
  count: number
  sum: number
  /** Observations per bucket, not cumulative: [i] counts those in (bounds[i-1], bounds[i]]. */
  inBucket: number[]
}

/** What prom-client's Registry reads from a metric when it renders or exports it. */
interface RenderedValue {
  value: number
  labels: Record<string, string | number>
  sharedLabels?: Record<string, string>
  metricName?: string
  exemplar?: null | undefined
}

/**
 * The request counter and duration histogram (`coffer_http_requests_total`,
 * `coffer_http_request_duration_seconds`), counted by hand and handed to prom-client's registry
 * as two metrics it renders like its own Counter and Histogram (same names, types, labels,
 * buckets and lines). prom-client's `inc(labels)` and `observe(labels, v)` cost ~9k instructions
 * per request together (a label hash string built, the labels validated, a closure and two
 * objects made, twice, #15); this finds the series through three Map lookups on values that
 * are already there (route templates are constant strings) and adds to plain numbers.
 */
export class RequestMetrics {
  private readonly byRoute = new Map<string, Map<string, Map<number, Series>>>()
  private series: Series[] = []

  constructor(
    registry: Pick<Registry, 'registerMetric'>,
    private readonly bounds: readonly number[],
    names: { counter: string; counterHelp: string; histogram: string; histogramHelp: string },
  ) {
    // Shaped as prom-client's Counter#get and Histogram#get return them, keys in their order. The
    // name is read from the registered object each time: an OpenMetrics registry renames counters.
    const counter = {
      name: names.counter,
      help: names.counterHelp,
      type: 'counter',
      get: async () => ({
        name: counter.name,
        help: counter.help,
        type: counter.type,
        values: this.series.map((s) => ({ value: s.count, labels: { ...s.labels } })),
        aggregator: 'sum',
      }),
      reset: () => this.reset(),
    }
    const histogram = {
      name: names.histogram,
      help: names.histogramHelp,
      type: 'histogram',
      // What the registry renders: the bucket bound as the first label, then the series' own.
      getForPromString: async () => ({ name: histogram.name, help: histogram.help, type: histogram.type, values: this.histogramValues(), aggregator: 'sum' }),
      // What getMetricsAsJSON returns: the labels merged, as prom-client's Histogram#get does.
      get: async () => ({
        name: histogram.name,
        help: histogram.help,
        type: histogram.type,
        values: this.histogramValues().map(({ sharedLabels, labels, ...v }) => ({ ...v, labels: { ...labels, ...sharedLabels } })),
        aggregator: 'sum',
      }),
      reset: () => this.reset(),
    }
    registry.registerMetric(counter as unknown as Metric)
    registry.registerMetric(histogram as unknown as Metric)
    this.histogramName = names.histogram
  }

  private readonly histogramName: string

  /** One finished request. */
  record(method: string, route: string, statusCode: number, seconds: number): void {
    let byMethod = this.byRoute.get(route)
    if (byMethod === undefined) this.byRoute.set(route, (byMethod = new Map<string, Map<number, Series>>()))
    let byStatus = byMethod.get(method)
    if (byStatus === undefined) byMethod.set(method, (byStatus = new Map<number, Series>()))
    let s = byStatus.get(statusCode)
    if (s === undefined) {
      s = { labels: { method, route, status_code: String(statusCode) }, count: 0, sum: 0, inBucket: this.bounds.map(() => 0) }
      byStatus.set(statusCode, s)
      this.series.push(s)
    }
    s.count++
    s.sum += seconds
    // The first bound at or above the value, as prom-client files it; above them all, only +Inf (the count).
    const bounds = this.bounds
    for (let i = 0; i < bounds.length; i++) {
      if (seconds <= bounds[i]!) {
        s.inBucket[i]!++
        break
      }
    }
  }

  private histogramValues(): RenderedValue[] {
    const name = this.histogramName
    const values: RenderedValue[] = []
    for (const s of this.series) {
      let cumulative = 0
      this.bounds.forEach((le, i) => {
        cumulative += s.inBucket[i]!
        values.push({ value: cumulative, labels: { le }, sharedLabels: s.labels, metricName: `${name}_bucket`, exemplar: null })
      })
      values.push({ value: s.count, labels: { le: '+Inf' }, sharedLabels: s.labels, metricName: `${name}_bucket`, exemplar: null })
      values.push({ value: s.sum, labels: {}, sharedLabels: s.labels, metricName: `${name}_sum`, exemplar: undefined })
      values.push({ value: s.count, labels: {}, sharedLabels: s.labels, metricName: `${name}_count`, exemplar: undefined })
    }
    return values
  }

  private reset(): void {
    this.byRoute.clear()
    this.series = []
  }
}
