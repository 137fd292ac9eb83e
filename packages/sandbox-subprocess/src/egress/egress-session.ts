// One run's view of the egress proxy: checks each destination against the run's policy, resolves
// names on the host and checks every address (again on every connection: DNS rebinding), counts
// bytes per host and keeps the report and the events.
import { EventEmitter } from 'node:events';
import {
  type Admission,
  admitDestination,
  hostLocalAddresses,
  type NetworkAllowedEntry,
  type NetworkDenialReason,
  type NetworkEvent,
  type NetworkReport,
  type NetworkRules,
} from '@coda/sandbox-core';
import { type EgressLookup, lookupWithTimeout } from './lookup.ts';

/** A destination the session admitted: the checked address to connect to. */
export type Admitted = Extract<Admission, { ok: true }>;

/** A refusal, already recorded in the report. */
export interface Refused {
  readonly ok: false;
  readonly reason: NetworkDenialReason;
  readonly detail: string;
}

/** The events of a {@link NetworkActivity}. */
export interface NetworkActivityEvents {
  /** One connection allowed or refused, as it happens. */
  event: [NetworkEvent];
}

/** Live network activity of one run: `event` for each connection allowed or refused. */
export class NetworkActivity extends EventEmitter<NetworkActivityEvents> {
  readonly #report: () => NetworkReport;

  /** @param report - gives the report so far (the session owning this activity). */
  constructor(report: () => NetworkReport) {
    super();
    this.#report = report;
  }

  /** Destinations reached and connections refused so far. */
  report(): NetworkReport {
    return this.#report();
  }
}

/**
 * What one run holds on the host at once. `relay`: tunnels moved by host-side relay processes
 * (1000 tunnels made 1000 processes, 479 MiB, before this bound; past it, tunnels are moved by
 * the proxy's own loop). `upstream`: connections to servers (pipelined plain HTTP requests made
 * one each: 2000 open at once from 4 client connections; past it, a connection is refused).
 */
export const runSlots = { relay: 16, upstream: 256 } as const;
/** Entries the report keeps in each list (allowed destinations, refusals). */
export const maxReportEntries = 1000;
const maxHostLength = 256;
const maxDetailLength = 512;
/** The allowed entry that counts destinations past {@link maxReportEntries}. */
const otherDestinations = '(other destinations)';

/** `text` cut to `max` characters, marked when cut. */
function bounded(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** Checks, resolves and counts for one run. */
export class EgressSession {
  readonly rules: NetworkRules;
  readonly activity: NetworkActivity = new NetworkActivity(() => this.report());
  readonly #lookup: EgressLookup;
  readonly #allowed = new Map<string, NetworkAllowedEntry>();
  readonly #denied: NetworkReport['denied'] = [];
  #bytes = 0;
  /** Connections (sockets, tunnel relays) to cut when the byte cap is reached or the session closes, each with the promise of its close. */
  readonly #open = new Map<{ destroy(): void }, Promise<void>>();
  #closed = false;

  constructor(rules: NetworkRules, lookup: EgressLookup) {
    this.rules = rules;
    this.#lookup = lookup;
  }

  /** A copy of the report so far. */
  report(): NetworkReport {
    return {
      allowed: [...this.#allowed.values()].map((entry) => ({ ...entry })),
      denied: this.#denied.map((entry) => ({ ...entry })),
    };
  }

  /**
   * Records a refusal and emits it. The host and detail a program chose are cut to a bounded
   * length, and the report keeps the first {@link maxReportEntries} refusals and the first of
   * each reason after them.
   */
  deny(host: string, port: number, reason: NetworkDenialReason, detail: string): Refused {
    const entry = {
      host: bounded(host.toLowerCase(), maxHostLength),
      port,
      reason,
      detail: bounded(detail, maxDetailLength),
    };
    // The first refusals, and past them the first of each reason (so a flood of one kind
    // cannot hide a later refusal of another); the events carry every one.
    if (
      this.#denied.length < maxReportEntries ||
      !this.#denied.some((kept) => kept.reason === reason)
    ) {
      this.#denied.push(entry);
    }
    this.activity.emit('event', { type: 'denied', ...entry });
    return { ok: false, reason, detail };
  }

  /** Whether `host:port` may be reached and, if so, the checked address to connect to. */
  async admit(host: string, port: number): Promise<Admitted | Refused> {
    if (!Number.isInteger(port) || port < 1 || port > 65_535) {
      return this.deny(host, port || 0, 'protocol', `no valid port in the request (${port})`);
    }
    if (this.#capHit || this.#overCap()) return this.#capRefusal(host, port);
    // What the host delivers to itself, on every admission: addresses come and go during a run
    // (a reading is reused for a second). Unreadable (out of descriptors), nothing is admitted.
    let hostAddresses: ReturnType<typeof hostLocalAddresses>;
    try {
      hostAddresses = hostLocalAddresses();
    } catch (error) {
      const why = `the host's own addresses could not be read: ${(error as Error).message}`;
      return this.deny(host, port, 'unreachable', why);
    }
    const admission = await admitDestination(
      this.rules,
      host,
      port,
      (name) => lookupWithTimeout(this.#lookup, name),
      hostAddresses,
    );
    if (!admission.ok) return this.deny(admission.host, port, admission.reason, admission.detail);
    return admission;
  }

  /** Records a connection made to an admitted destination; returns the entry its bytes go to. */
  opened(admitted: Admitted): NetworkAllowedEntry {
    // Past maxReportEntries destinations, the rest are counted together in one entry.
    const full = this.#allowed.size >= maxReportEntries;
    const key =
      full && !this.#allowed.has(`${admitted.host}:${admitted.port}`)
        ? otherDestinations
        : `${admitted.host}:${admitted.port}`;
    let entry = this.#allowed.get(key);
    if (entry === undefined) {
      entry = {
        host: key === otherDestinations ? otherDestinations : admitted.host,
        port: key === otherDestinations ? 0 : admitted.port,
        bytes: 0,
        bytesSent: 0,
        bytesReceived: 0,
        connections: 0,
      };
      this.#allowed.set(key, entry);
    }
    entry.connections += 1;
    this.activity.emit('event', {
      type: 'allowed',
      host: admitted.host,
      port: admitted.port,
      address: admitted.address,
    });
    return entry;
  }

  /**
   * Keeps `connection` until it closes, so the cap and close() can cut it (at once, when the
   * session is closed already).
   */
  track(connection: {
    destroy(): void;
    once(event: 'close', listener: () => void): unknown;
  }): void {
    const closed = new Promise<void>((resolve) => {
      connection.once('close', () => {
        this.#open.delete(connection);
        resolve();
      });
    });
    this.#open.set(connection, closed);
    if (this.#closed) connection.destroy();
  }

  /**
   * Sets aside up to `want` bytes of `maxEgressBytes` for a tunnel relay, which counts them as
   * it passes them on; `final` when that was all the cap had left (the relay then stops at it).
   * Undefined without a cap. What other connections move meanwhile is not held back by it.
   */
  reserve(want: number): { bytes: number; final: boolean } | undefined {
    const cap = this.rules.policy.maxEgressBytes;
    if (cap === undefined) return undefined;
    const available = Math.max(0, cap - this.#bytes - this.#reserved);
    const bytes = Math.min(want, available);
    this.#reserved += bytes;
    return { bytes, final: bytes === available };
  }

  /** Gives back reserved bytes: counted since, or left over when a relay ended. */
  release(bytes: number): void {
    this.#reserved = Math.max(0, this.#reserved - bytes);
  }

  #reserved = 0;

  /**
   * Takes one of the run's slots of `kind` (see {@link runSlots}): false when all are taken.
   * Each taken slot is given back with {@link releaseSlot} once its connection or relay ended.
   */
  takeSlot(kind: keyof typeof runSlots): boolean {
    if (this.#slots[kind] >= runSlots[kind]) return false;
    this.#slots[kind] += 1;
    return true;
  }

  /** Gives back a slot taken with {@link takeSlot}. */
  releaseSlot(kind: keyof typeof runSlots): void {
    this.#slots[kind] = Math.max(0, this.#slots[kind] - 1);
  }

  readonly #slots: Record<keyof typeof runSlots, number> = { relay: 0, upstream: 0 };

  /**
   * Counts bytes moved for `entry`. Returns false (and cuts every connection of the run) once
   * the policy's `maxEgressBytes` is passed.
   */
  count(entry: NetworkAllowedEntry, sent: number, received: number): boolean {
    entry.bytesSent += sent;
    entry.bytesReceived += received;
    entry.bytes += sent + received;
    this.#bytes += sent + received;
    if (!this.#overCap()) return true;
    this.reachedCap(entry);
    return false;
  }

  /**
   * The cap is reached (passed by `count`, or a relay's final budget ran out with more to
   * move): reports it once and cuts every connection of the run.
   */
  reachedCap(entry: NetworkAllowedEntry): void {
    if (!this.#capReported) {
      this.#capReported = true;
      this.#capRefusal(entry.host, entry.port);
    }
    for (const connection of this.#open.keys()) connection.destroy();
  }

  #capReported = false;

  /**
   * Whether `bytes` more would stay within `maxEgressBytes` (always, without a cap), with what
   * relays hold of it counted as spent: they may move it without asking again.
   */
  fits(bytes: number): boolean {
    const cap = this.rules.policy.maxEgressBytes;
    return cap === undefined || this.#bytes + this.#reserved + bytes <= cap;
  }

  /**
   * `bytes` that did not fit were not sent. Past the cap itself, nothing more is admitted from
   * now on (reported once); short of it, what is left is held by the run's relays, and a later
   * request may fit once they give it back. The run's open connections go on either way.
   */
  refuseOverCap(host: string, port: number, bytes: number): Refused {
    const cap = this.rules.policy.maxEgressBytes ?? Number.POSITIVE_INFINITY;
    if (this.#bytes + bytes <= cap) {
      return this.deny(
        host,
        port,
        'egress-limit',
        `${this.#capDetail()}: what is left of it is held by the run's bulk tunnels`,
      );
    }
    this.#capHit = true;
    if (this.#capReported) {
      return { ok: false, reason: 'egress-limit', detail: this.#capDetail() };
    }
    this.#capReported = true;
    return this.#capRefusal(host, port);
  }

  #capHit = false;

  /**
   * Whether counted bytes passed the cap, with relays' holdings counted as spent: a relay gives
   * back what it moved before counting it, so only bytes beyond every holding pass it.
   */
  #overCap(): boolean {
    const cap = this.rules.policy.maxEgressBytes;
    return cap !== undefined && this.#bytes + this.#reserved > cap;
  }

  #capDetail(): string {
    return `maxEgressBytes (${this.rules.policy.maxEgressBytes}) reached`;
  }

  #capRefusal(host: string, port: number): Refused {
    return this.deny(host, port, 'egress-limit', this.#capDetail());
  }

  /**
   * Cuts every open connection; resolves once all of them are closed (a tunnel relay's process
   * gone and its last counts read, so the report is final).
   */
  async close(): Promise<void> {
    this.#closed = true;
    const closing = [...this.#open.values()];
    for (const connection of this.#open.keys()) connection.destroy();
    await Promise.all(closing);
  }
}
