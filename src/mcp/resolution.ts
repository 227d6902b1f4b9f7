/**
 * Turns the probes of all candidates into the resolve answer (`McpResolveResponse`). Pure and
 * deterministic: the probe workflow calls it.
 */
import { describeOutcome, qualifies } from './decide';
import type { McpProbeResult, McpResolveInput, McpResolveResponse } from './types';

export function assembleResponse(input: McpResolveInput, probes: McpProbeResult[]): McpResolveResponse {
  const attempted = input.candidates.map((c) => c.url);
  let winner: { url: string; suggestedName: string; probe: McpProbeResult } | undefined;
  // The first qualifying candidate in candidate order wins, whichever probe finished first.
  for (const candidate of input.candidates) {
    const probe = probes.find((p) => p.url === candidate.url);
    if (probe && qualifies(probe.discovery, candidate.source)) {
      winner = { url: candidate.url, suggestedName: candidate.suggestedName, probe };
      break;
    }
  }
  const match = winner && { url: winner.url, suggestedName: winner.suggestedName, discovery: winner.probe.discovery };
  const outcomes = input.candidates
    .map((c) => {
      const probe = probes.find((p) => p.url === c.url);
      return `${c.url}: ${probe ? describeOutcome(probe.discovery) : 'not probed'}`;
    })
    .join('; ');

  if (input.preset) {
    return match
      ? { resolution: 'preset', attempted, preset: input.preset, match }
      : {
          resolution: 'preset',
          attempted,
          preset: input.preset,
          reason: `Matched the ${input.preset.displayName} preset, but its server could not be probed. ${outcomes}`,
        };
  }
  if (match) return { resolution: 'discovered', attempted, match };
  return { resolution: 'not_found', attempted, reason: `No MCP server was found. ${outcomes}` };
}
