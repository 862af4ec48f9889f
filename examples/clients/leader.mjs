#!/usr/bin/env node
// leader.mjs: does this replica lead? Asks the leader-sidecar next door.
//
// Node.js 20 or later, no packages. Copy this file next to your
// application, then either run it:
//
//   node leader.mjs         prints "<token> <identity> <validForMs>", exits 0
//                           while this replica leads, 1 while it does not, 2
//                           when the sidecar does not answer usably ("not
//                           leader" too)
//   node leader.mjs --wait  blocks until this replica leads (following
//                           /leader/watch), then prints and exits as above
//
// In shard mode (the sidecar's --shards N), each shard has its own term:
//
//   node leader.mjs --shards          prints "<shard> <token> <state>
//                                     <identity>" for each shard held here
//                                     (state "held", or "draining": stop
//                                     working on it, then acknowledge), exits
//                                     0 while it holds one, 1 while it holds
//                                     none, 2 as above
//   node leader.mjs --shard-selector  prints the shardSelector of the shards
//                                     held here, exits 0, 1 or 2 alike
//   node leader.mjs --watch-shards    follows /shards/watch and prints
//                                     "<event> <shard> <token> <identity>" for
//                                     each acquired, draining, undrained,
//                                     renewed, released and lost; exits 2
//                                     when the stream ends or breaks (what is
//                                     held is then unknown)
//   node leader.mjs --drained I [T]   acknowledges the drain of shard I (POST
//                                     /shards/I/drained?token=T: the sidecar
//                                     releases it), in the term of token T if
//                                     given, exits 0, 1 when shard I does not
//                                     drain here (or in another term), 2 as
//                                     above
//
// or import it:
//
//   import { currentTerm } from './leader.mjs';
//   const term = await currentTerm();   // null unless this replica leads
//   if (term) {
//     await write(..., term.token, term.identity);  // checked by the resource
//     if (!term.valid()) { ... }                    // the claim lapsed meanwhile
//   }
//
//   import { shards, watchShards, drained, ShardEvent, ShardGuard } from './leader.mjs';
//   const guard = new ShardGuard();                 // refuses a shard's older term
//   for (const t of (await shards()).held) {        // ShardTerm: group, shard, token, holder, state, ...
//     if (t.valid()) await guard.do(t, () => write(..., t.shard, t.token, t.holder));
//   }
//   for await (const ev of watchShards()) {         // ShardEvent (typed events) and Shards (states)
//     if (ev instanceof ShardEvent && ev.event === 'draining') {
//       await stop(ev.term.shard);
//       await drained(ev.term.shard);
//     }
//   }
//
// A term's deadline is on performance.now(): validForMs counted from the
// moment the request was sent, so it needs neither the sidecar's clock nor
// date parsing. It only narrows the window in which a paused process works
// as a stale leader; the resource's check of the token (docs/fencing.md) is
// what refuses a stale write. A shard term's deadline is its validUntil, on
// the wall clock (Date.now()) that the sidecar next door shares.
//
// ShardGuard is that check for data this process owns, per shard, as
// pkg/fence's MemoryGuard.DoShard: a write presenting a shard's token lower
// than the highest it accepted for that shard (or that token from another
// holder) is refused with StaleTokenError. Data that lives elsewhere needs
// the same check where it lives, atomically with the write (docs/fencing.md).
//
// LEADER_SIDECAR_URL is the sidecar's app API (default http://127.0.0.1:4040).

import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { argv, env, exit, stderr, stdout } from 'node:process';
import { pathToFileURL } from 'node:url';

export const DEFAULT_URL = 'http://127.0.0.1:4040';
const MAX_ANSWER = 64 << 10; // bytes; the sidecar's answers are far smaller
const MAX_SHARDS_ANSWER = 1 << 20; // bytes; GET /shards of 256 shards is about 64 KiB

/** The sidecar did not answer, or answered something unusable. */
export class SidecarError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'SidecarError';
  }
}

/** A term this replica leads in: attach token and identity to writes. */
export class Term {
  constructor(token, identity, deadline) {
    this.token = token;
    this.identity = identity;
    this.deadline = deadline; // performance.now() at which the claim lapses unless renewed
  }

  /** Whether the claim has not lapsed yet (ask again to renew it). */
  valid() {
    return performance.now() < this.deadline;
  }

  validForMs() {
    return Math.max(0, Math.floor(this.deadline - performance.now()));
  }
}

function base(url) {
  return (url || env.LEADER_SIDECAR_URL || DEFAULT_URL).replace(/\/+$/, '');
}

function decode(body) {
  let state;
  try {
    state = JSON.parse(body);
  } catch (e) {
    throw new SidecarError(`not JSON: ${JSON.stringify(body.slice(0, 200))}`, { cause: e });
  }
  if (state === null || typeof state !== 'object' || typeof state.leader !== 'boolean') {
    throw new SidecarError(`no leader field: ${JSON.stringify(body.slice(0, 200))}`);
  }
  return state;
}

// Requests go through node:http, loaded with this module, so that a
// timeout counts the request only (fetch loads its implementation at the
// first call, which a busy machine can make last seconds).

/**
 * Sends method to where; resolves to { status, statusText, body }, the body
 * as text, or rejects with a SidecarError when no answer of at most limit
 * bytes came within timeoutMs.
 */
function send(method, where, timeoutMs, limit) {
  return new Promise((resolve, reject) => {
    let timer;
    const fail = (e) => {
      clearTimeout(timer);
      reject(e instanceof SidecarError ? e : new SidecarError(`${method} ${where}: ${e.message}`, { cause: e }));
    };
    let req;
    try {
      req = http.request(where, { method, agent: false }, (resp) => {
        const chunks = [];
        let size = 0;
        resp.on('data', (chunk) => {
          size += chunk.length;
          if (size > limit) req.destroy(new SidecarError(`answer larger than ${limit} bytes`));
          else chunks.push(chunk);
        });
        resp.on('error', fail);
        resp.on('end', () => {
          clearTimeout(timer);
          resolve({ status: resp.statusCode, statusText: resp.statusMessage, body: Buffer.concat(chunks).toString('utf8') });
        });
      });
    } catch (e) {
      fail(e); // not an http:// URL
      return;
    }
    timer = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    req.on('error', fail);
    req.end();
  });
}

/** ': <the sidecar's error>' of an error answer whose JSON body names one
 * (a shard group's 409 says to ask GET /shards), else ''. */
function reasonOf(body) {
  try {
    const err = JSON.parse(body).error;
    return typeof err === 'string' && err ? `: ${err}` : '';
  } catch {
    return '';
  }
}

async function get(url, path, timeoutMs, limit) {
  const where = `${base(url)}${path}`;
  const { status, statusText, body } = await send('GET', where, timeoutMs, limit);
  if (status < 200 || status > 299) {
    throw new SidecarError(`GET ${where}: ${status} ${statusText}${reasonOf(body)}`);
  }
  return body;
}

/** GET /leader: the sidecar's answer as an object (see fence.LeaderJSON). */
export async function state(url, timeoutMs = 2000) {
  return decode(await get(url, '/leader', timeoutMs, MAX_ANSWER));
}

/**
 * The term in a /leader answer obtained by a request sent at sent
 * (performance.now()), or null if it does not lead.
 */
export function termOf(answer, sent) {
  if (!answer.leader) return null;
  const { token, identity, validForMs } = answer;
  for (const [name, value] of [['token', token], ['validForMs', validForMs]]) {
    if (!Number.isSafeInteger(value)) {
      throw new SidecarError(`a leader answer with ${name} ${JSON.stringify(value)}`);
    }
  }
  if (token < 1 || validForMs < 0 || typeof identity !== 'string' || identity === '') {
    throw new SidecarError(`a leader answer needs a token >= 1, an identity and validForMs >= 0: ${JSON.stringify(answer)}`);
  }
  return new Term(token, identity, sent + validForMs);
}

/**
 * The term this replica leads in now, or null. Throws SidecarError when
 * the sidecar does not answer usably: take that as "not leader".
 */
export async function currentTerm(url, timeoutMs = 2000) {
  const sent = performance.now();
  return termOf(await state(url, timeoutMs), sent);
}

/**
 * Yields [event name, data] for each Server-Sent Event of GET path, the name
 * '' for an event without an event: field. Throws SidecarError if the
 * stream cannot be opened, breaks, ends or stays silent (no event, no
 * keep-alive) for idleTimeoutMs.
 */
async function* events(url, path, idleTimeoutMs) {
  const where = `${base(url)}${path}`;
  let req;
  let idle;
  const quiet = () => {
    clearTimeout(idle);
    idle = setTimeout(() => req.destroy(new Error(`silent for ${idleTimeoutMs} ms`)), idleTimeoutMs);
  };
  try {
    let resp;
    try {
      resp = await new Promise((resolve, reject) => {
        req = http.get(where, { agent: false, headers: { Accept: 'text/event-stream' } }, resolve);
        req.on('error', reject); // and, once answered, errors the stream below reports
        quiet();
      });
    } catch (e) {
      throw new SidecarError(`GET ${where}: ${e.message}`, { cause: e });
    }
    if (resp.statusCode !== 200) {
      throw new SidecarError(`GET ${where}: ${resp.statusCode} ${resp.statusMessage}`);
    }
    resp.setEncoding('utf8');
    let pending = '';
    let name = '';
    let data = [];
    try {
      for await (const chunk of resp) {
        quiet();
        pending += chunk;
        let end;
        while ((end = pending.indexOf('\n')) >= 0) {
          const line = pending.slice(0, end).replace(/\r$/, '');
          pending = pending.slice(end + 1);
          if (line.startsWith('data:')) {
            data.push(line.slice(5).replace(/^ /, ''));
          } else if (line.startsWith('event:')) {
            name = line.slice(6).trim();
          } else if (line === '') {
            if (data.length > 0) yield [name, data.join('\n')];
            name = '';
            data = [];
          } // else a comment (keep-alive) or another field
        }
      }
    } catch (e) {
      throw new SidecarError(`the stream from the sidecar broke: ${e.message}`, { cause: e });
    }
    throw new SidecarError('the sidecar ended the stream');
  } finally {
    clearTimeout(idle);
    req?.destroy();
  }
}

/**
 * Resolves when this replica leads, following GET /leader/watch (Server-Sent
 * Events), then confirms with a fresh GET /leader, whose send time the
 * deadline counts from. Throws SidecarError if the stream breaks or stays
 * silent (no event, no keep-alive) for idleTimeoutMs.
 */
export async function waitForTerm(url, idleTimeoutMs = 45000) {
  for await (const [name, data] of events(url, '/leader/watch', idleTimeoutMs)) {
    if (name === '' && decode(data).leader) {
      const term = await currentTerm(url);
      if (term !== null) return term;
    }
  }
  throw new SidecarError('the sidecar ended the stream'); // not reached: events throws
}

// Shard mode (--shards N): GET /shards, GET /shards/watch, POST
// /shards/{i}/drained. The JSON is fence.ShardsJSON, fence.ShardJSON and
// fence.ShardEventJSON in pkg/fence; see docs/shards.md.

export const HELD = 'held';
export const DRAINING = 'draining';
export const SHARD_EVENTS = ['acquired', 'draining', 'undrained', 'renewed', 'released', 'lost'];

/** A write presented a shard's term older than the last one accepted. */
export class StaleTokenError extends Error {
  constructor(message) {
    super(message);
    this.name = 'StaleTokenError';
  }
}

/**
 * One term of one shard held here: attach shard, token and holder to every
 * write of the shard's data (ShardGuard, or the check where the data lives,
 * refuses an older term). Within a group, a token counts only its shard's
 * terms.
 */
export class ShardTerm {
  constructor(group, shard, token, holder, state, start, end, validUntil, shards) {
    this.group = group;
    this.shard = shard;
    this.token = token;
    this.holder = holder; // the sidecar's identity
    this.state = state; // 'held'; 'draining': stop, then drained(shard); in an event that ends it, 'released' or 'lost'
    this.start = start; // the shard's range of FNV-1a 64 hashes of keys, [start, end)
    this.end = end;
    this.validUntil = validUntil; // Date.now() at which the claim lapses unless renewed
    this.shards = shards; // the group's number of shards, part of the resource name
  }

  /** Whether to work on the shard: held, not draining, not lapsed. */
  valid() {
    return this.state === HELD && Date.now() < this.validUntil;
  }

  /** The name the guards fence the shard's data under (fence.ShardResource). */
  get resource() {
    return `${this.group}/${this.shards}/shard-${this.shard}`;
  }
}

/** GET /shards, and each state of GET /shards/watch. */
export class Shards {
  constructor(group, identity, shards, members, leaving, held, shardSelector) {
    this.group = group;
    this.identity = identity;
    this.shards = shards; // the group's shards, numbered from 0
    this.members = members; // the live members this replica sees
    this.leaving = leaving; // the sidecar began a graceful stop
    this.held = held; // a ShardTerm per shard held here, by shard number
    this.shardSelector = shardSelector; // the held ranges for a sharded watch; '' when none is held
  }
}

/**
 * A typed event of GET /shards/watch: event is one of SHARD_EVENTS (or one
 * added later: ignore it), term the shard's term it is about.
 */
export class ShardEvent {
  constructor(event, term) {
    this.event = event;
    this.term = term;
  }
}

function parseJSON(text, what) {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new SidecarError(`${what} is not JSON: ${JSON.stringify(text.slice(0, 200))}`, { cause: e });
  }
}

/** The ShardTerm of a held shard's JSON (or an event's), checked. */
function shardTerm(h, group, identity, n, states) {
  if (h === null || typeof h !== 'object') {
    throw new SidecarError(`a held shard that is not an object: ${JSON.stringify(h)}`);
  }
  const { shard, token, state, range, validUntil } = h;
  if (!Number.isSafeInteger(shard) || shard < 0 || shard >= n) {
    throw new SidecarError(`shard ${JSON.stringify(shard)} of ${n}`);
  }
  if (!Number.isSafeInteger(token) || token < 1) {
    throw new SidecarError(`shard ${shard} with token ${JSON.stringify(token)}, want >= 1`);
  }
  if (!states.includes(state)) {
    throw new SidecarError(`shard ${shard} in state ${JSON.stringify(state)}`);
  }
  if (range === null || typeof range !== 'object' || typeof range.start !== 'string' || typeof range.end !== 'string') {
    throw new SidecarError(`shard ${shard} without a range`);
  }
  const until = typeof validUntil === 'string' ? Date.parse(validUntil) : NaN;
  if (!Number.isFinite(until)) {
    throw new SidecarError(`shard ${shard} with validUntil ${JSON.stringify(validUntil)}, not an RFC 3339 time`);
  }
  return new ShardTerm(group, shard, token, identity, state, range.start, range.end, until, n);
}

/**
 * The Shards of a GET /shards answer (or a state of /shards/watch), checked
 * as pkg/fence checks it; unknown fields are ignored.
 */
export function shardsOf(answer) {
  if (answer === null || typeof answer !== 'object') {
    throw new SidecarError(`not a shards answer: ${JSON.stringify(answer)}`);
  }
  const { group, identity, shards: n, held, shardSelector, members, leaving } = answer;
  if (typeof group !== 'string' || group === '' || typeof identity !== 'string' || identity === '') {
    throw new SidecarError(`a shards answer without a group or an identity: ${JSON.stringify(answer)}`);
  }
  if (!Number.isSafeInteger(n) || n < 1 || !Array.isArray(held) || typeof shardSelector !== 'string') {
    throw new SidecarError(`a shards answer needs shards >= 1, held and shardSelector: ${JSON.stringify(answer)}`);
  }
  const terms = held.map((h) => shardTerm(h, group, identity, n, [HELD, DRAINING])).sort((a, b) => a.shard - b.shard);
  if (new Set(terms.map((t) => t.shard)).size !== terms.length) {
    throw new SidecarError(`a shard held twice: ${JSON.stringify(held)}`);
  }
  if ((terms.length > 0) !== (shardSelector !== '')) {
    throw new SidecarError(`shardSelector ${JSON.stringify(shardSelector)} with ${terms.length} shards held`);
  }
  return new Shards(group, identity, n, Array.isArray(members) ? members : [], leaving === true, terms, shardSelector);
}

/**
 * GET /shards: the shards held here, each with its term, and the
 * shardSelector. Throws SidecarError when the sidecar does not answer
 * usably (not in shard mode, say): take that as holding nothing.
 */
export async function shards(url, timeoutMs = 2000) {
  return shardsOf(parseJSON(await get(url, '/shards', timeoutMs, MAX_SHARDS_ANSWER), 'the shards answer'));
}

/**
 * Follows GET /shards/watch: yields a ShardEvent for each typed event, in
 * order (a new stream begins with acquired for every shard held), and the
 * Shards of each state (a change of members, shards, tokens or states).
 * Renewals come as renewed events only, with the later validUntil. Throws
 * SidecarError when the stream cannot be opened, breaks or ends: then
 * nothing held is known any more; stop working on every shard.
 */
export async function* watchShards(url, idleTimeoutMs = 45000) {
  const first = await shards(url); // the group and identity, which typed events do not repeat
  const { group, identity, shards: n } = first;
  for await (const [name, data] of events(url, '/shards/watch', idleTimeoutMs)) {
    const body = parseJSON(data, 'an event');
    if (name === '') {
      const st = shardsOf(body);
      if (st.group !== group || st.identity !== identity || st.shards !== n) {
        throw new SidecarError(`the stream is from another sidecar: ${st.identity}, not ${identity}`);
      }
      yield st;
    } else if (SHARD_EVENTS.includes(name)) {
      const states = name === 'released' || name === 'lost' ? [name] : [HELD, DRAINING];
      yield new ShardEvent(name, shardTerm(body, group, identity, n, states));
    } // else an event added later: ignored
  }
}

/**
 * POST /shards/{shard}/drained?token=N: this application has stopped working
 * on the draining shard in the term of token N (the ShardTerm's token;
 * without it, whichever term drains), and the sidecar releases it at once.
 * Resolves false when the shard does not drain here, or drains in another
 * term (409); throws SidecarError for any other answer.
 */
export async function drained(shard, url, timeoutMs = 2000, token = undefined) {
  if (!Number.isSafeInteger(shard) || shard < 0) {
    throw new SidecarError(`shard ${JSON.stringify(shard)} is not a shard number`);
  }
  if (token !== undefined && (!Number.isSafeInteger(token) || token < 1)) {
    throw new SidecarError(`token ${JSON.stringify(token)} is not a token`);
  }
  const where = `${base(url)}/shards/${shard}/drained` + (token === undefined ? '' : `?token=${token}`);
  const { status, statusText, body } = await send('POST', where, timeoutMs, MAX_ANSWER);
  if (status === 409) return false;
  if (status < 200 || status > 299) {
    throw new SidecarError(`POST ${where}: ${status} ${statusText} ${body.slice(0, 200)}`);
  }
  return true;
}

/**
 * Fences data this process owns, per shard, as pkg/fence's
 * MemoryGuard.DoShard: it remembers, for each shard of each group, the last
 * term whose write succeeded, and runs a write only if its term follows that
 * one: a higher token, or the same token from the same holder. A lower
 * token, or an equal one from another holder, is refused with
 * StaleTokenError; other shards' tokens do not matter. Writes run one at a
 * time, each checked just before it runs, so no newer term is accepted
 * between the check and the write. It fences nothing across processes: for
 * data elsewhere, put the same check where the data lives (docs/fencing.md).
 */
export class ShardGuard {
  #accepted = new Map(); // resource -> { token, holder }
  #queue = Promise.resolve();

  /**
   * Runs await write() if term follows the last term accepted for its
   * shard, records term as accepted if write resolves, and resolves to what
   * it resolves to; else rejects with StaleTokenError without running it.
   */
  do(term, write) {
    const run = this.#queue.then(() => this.#run(term, write));
    this.#queue = run.catch(() => {});
    return run;
  }

  async #run(term, write) {
    const { group, shards, shard, token, holder } = term;
    if (typeof group !== 'string' || group === '' || !Number.isSafeInteger(shards) || !Number.isSafeInteger(shard) || shard < 0 || shard >= shards) {
      throw new TypeError(`a shard term needs a group and a shard of its count: ${JSON.stringify(term)}`);
    }
    if (!Number.isSafeInteger(token) || token < 0 || typeof holder !== 'string' || holder === '') {
      throw new TypeError(`a shard term needs a token >= 0 and a holder: ${JSON.stringify(term)}`);
    }
    const key = `${group}/${shards}/shard-${shard}`; // term.resource, for a copy of a term too
    const last = this.#accepted.get(key);
    if (last && !(token > last.token || (token === last.token && holder === last.holder))) {
      throw new StaleTokenError(`${key} accepted token ${last.token} of ${last.holder}, this write has token ${token} of ${holder}`);
    }
    const result = await write();
    this.#accepted.set(key, { token, holder });
    return result;
  }

  /** The last { token, holder } accepted for shard of a group of shards, or undefined. */
  accepted(group, shards, shard) {
    return this.#accepted.get(`${group}/${shards}/shard-${shard}`);
  }
}

const USAGE = 'usage: leader.mjs [--wait | --shards | --shard-selector | --watch-shards | --drained SHARD [TOKEN]]';

async function run(args) {
  const is = (...want) => args.length === want.length && want.every((a, i) => args[i] === a);
  if (args.length === 0 || is('--wait')) {
    const term = args.length ? await waitForTerm() : await currentTerm();
    if (term === null) return 1;
    stdout.write(`${term.token} ${term.identity} ${term.validForMs()}\n`);
    return 0;
  }
  if (is('--shards')) {
    const st = await shards();
    for (const t of st.held) stdout.write(`${t.shard} ${t.token} ${t.state} ${t.holder}\n`);
    return st.held.length > 0 ? 0 : 1;
  }
  if (is('--shard-selector')) {
    const st = await shards();
    if (st.shardSelector === '') return 1;
    stdout.write(`${st.shardSelector}\n`);
    return 0;
  }
  if (is('--watch-shards')) {
    for await (const ev of watchShards()) {
      if (ev instanceof ShardEvent) stdout.write(`${ev.event} ${ev.term.shard} ${ev.term.token} ${ev.term.holder}\n`);
    }
    return 2; // not reached: watchShards throws when the stream ends
  }
  if ((args.length === 2 || args.length === 3) && args[0] === '--drained' && args.slice(1).every((a) => /^[0-9]+$/.test(a))) {
    if (await drained(Number(args[1]), undefined, 2000, args.length === 3 ? Number(args[2]) : undefined)) return 0;
    stderr.write(`leader.mjs: shard ${args[1]} does not drain here\n`);
    return 1;
  }
  stderr.write(`${USAGE}\n`);
  return 2;
}

async function main(args) {
  try {
    return await run(args);
  } catch (e) {
    if (!(e instanceof SidecarError)) throw e;
    stderr.write(`leader.mjs: ${e.message}\n`);
    return 2;
  }
}

if (argv[1] && import.meta.url === pathToFileURL(argv[1]).href) {
  exit(await main(argv.slice(2)));
}
