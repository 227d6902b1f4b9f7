import type { TestResponse } from './stack';

/**
 * Sends as a runtime or GitHub does under a refusal: while `again` says the answer recorded
 * nothing (a shed, an outage), the request is sent again after the Retry-After it named (1 s when
 * it named none), `tries` sends at most; the last answer is returned either way.
 */
export async function sendHonouringRetryAfter(
  send: () => Promise<TestResponse>,
  again: (response: TestResponse) => boolean,
  tries = 5,
): Promise<TestResponse> {
  for (let sent = 1; ; sent++) {
    const response = await send();
    if (sent === tries || !again(response)) return response;
    await new Promise((resolve) => setTimeout(resolve, Number(response.headers.get('retry-after') ?? 1) * 1000));
  }
}
