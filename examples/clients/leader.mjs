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
// or import it:
//
//   import { currentTerm } from './leader.mjs';
//   const term = await currentTerm();   // null unless this replica leads
//   if (term) {
//     await write(..., term.token, term.identity);  // checked by the resource
//     if (!term.valid()) { ... }                    // the claim lapsed meanwhile
//   }
//
// A term's deadline is on performance.now(): validForMs counted from the
// moment the request was sent, so it needs neither the sidecar's clock nor
// date parsing. It only narrows the window in which a paused process works
// as a stale leader; the resource's check of the token (docs/fencing.md) is
// what refuses a stale write.
//
// LEADER_SIDECAR_URL is the sidecar's app API (default http://127.0.0.1:4040).

import { performance } from 'node:perf_hooks';
import { argv, env, exit, stderr, stdout } from 'node:process';
import { pathToFileURL } from 'node:url';

export const DEFAULT_URL = 'http://127.0.0.1:4040';
const MAX_ANSWER = 64 << 10; // bytes; the sidecar's answers are far smaller

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

/** GET /leader: the sidecar's answer as an object (see fence.LeaderJSON). */
export async function state(url, timeoutMs = 2000) {
  const where = `${base(url)}/leader`;
  let body;
  try {
    const resp = await fetch(where, { signal: AbortSignal.timeout(timeoutMs) });
    if (!resp.ok) {
      throw new SidecarError(`GET ${where}: ${resp.status} ${resp.statusText}`);
    }
    body = await resp.text();
  } catch (e) {
    if (e instanceof SidecarError) throw e;
    throw new SidecarError(`GET ${where}: ${e.cause?.message ?? e.message}`, { cause: e });
  }
  if (Buffer.byteLength(body) > MAX_ANSWER) {
    throw new SidecarError(`answer larger than ${MAX_ANSWER} bytes`);
  }
  return decode(body);
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
 * Resolves when this replica leads, following GET /leader/watch (Server-Sent
 * Events), then confirms with a fresh GET /leader, whose send time the
 * deadline counts from. Throws SidecarError if the stream breaks or stays
 * silent (no event, no keep-alive) for idleTimeoutMs.
 */
export async function waitForTerm(url, idleTimeoutMs = 45000) {
  const where = `${base(url)}/leader/watch`;
  const abort = new AbortController();
  let idle;
  const quiet = () => {
    clearTimeout(idle);
    idle = setTimeout(() => abort.abort(new Error(`silent for ${idleTimeoutMs} ms`)), idleTimeoutMs);
  };
  quiet();
  try {
    let resp;
    try {
      resp = await fetch(where, { signal: abort.signal, headers: { Accept: 'text/event-stream' } });
    } catch (e) {
      throw new SidecarError(`GET ${where}: ${e.cause?.message ?? e.message}`, { cause: e });
    }
    if (!resp.ok) {
      throw new SidecarError(`GET ${where}: ${resp.status} ${resp.statusText}`);
    }
    const decoder = new TextDecoder();
    let pending = '';
    let data = [];
    try {
      for await (const chunk of resp.body) {
        quiet();
        pending += decoder.decode(chunk, { stream: true });
        let end;
        while ((end = pending.indexOf('\n')) >= 0) {
          const line = pending.slice(0, end).replace(/\r$/, '');
          pending = pending.slice(end + 1);
          if (line.startsWith('data:')) {
            data.push(line.slice(5).replace(/^ /, ''));
            continue;
          }
          if (line !== '' || data.length === 0) continue; // a comment (keep-alive), another field, or no event yet
          const event = data.join('\n');
          data = [];
          if (decode(event).leader) {
            const term = await currentTerm(url);
            if (term !== null) return term;
          }
        }
      }
    } catch (e) {
      if (e instanceof SidecarError) throw e;
      throw new SidecarError(`the stream from the sidecar broke: ${abort.signal.reason?.message ?? e.message}`, { cause: e });
    }
    throw new SidecarError('the sidecar ended the stream');
  } finally {
    clearTimeout(idle);
    abort.abort();
  }
}

async function main(args) {
  const wait = args.includes('--wait');
  if (args.some((a) => a !== '--wait')) {
    stderr.write('usage: leader.mjs [--wait]\n');
    return 2;
  }
  let term;
  try {
    term = wait ? await waitForTerm() : await currentTerm();
  } catch (e) {
    if (!(e instanceof SidecarError)) throw e;
    stderr.write(`leader.mjs: ${e.message}\n`);
    return 2;
  }
  if (term === null) return 1;
  stdout.write(`${term.token} ${term.identity} ${term.validForMs()}\n`);
  return 0;
}

if (argv[1] && import.meta.url === pathToFileURL(argv[1]).href) {
  exit(await main(argv.slice(2)));
}
