/**
 * Turns the probes of all candidates into the resolve answer (`McpResolveResponse`). Pure and
 * deterministic: the probe workflow calls it.
 */
import { describeOutcome, qualifies } from './decide';
import type { McpPreset, McpProbeResult, McpResolveInput, McpResolveResponse, PresetMatch } from './types';

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
    const matched = presetMatchReason(input.preset, input.presetMatch);
    return match
      ? { resolution: 'preset', attempted, preset: input.preset, reason: matched, match }
      : { resolution: 'preset', attempted, preset: input.preset, reason: `${matched} Its server could not be probed. ${outcomes}` };
  }
  if (match) return { resolution: 'discovered', attempted, match };
  return { resolution: 'not_found', attempted, reason: `No MCP server was found. ${outcomes}` };
}

/** Why the query matched its preset, in a sentence (inputs recorded before the match was passed on say only which preset). */
function presetMatchReason(preset: McpPreset, match: PresetMatch | undefined): string {
  const matched = `Matched the ${preset.displayName} preset`;
  switch (match?.by) {
    case 'name':
      return `${matched} by name.`;
    case 'host':
      return `${matched} by its server's host, ${match.host}.`;
    case 'domain':
      return `${matched} by domain: the query names ${match.domain}.`;
    default:
      return `${matched}.`;
  }
}
