package dev.cycles;

import dev.cycles.internal.Native;

/**
 * What a model call costs (docs/integrations.md, "Estimate, price, caps: the core functions"):
 * core's pure pricing functions as JSON in, JSON out, in the encoding of the shared vectors
 * ({@code conformance/vectors/pricing.json}): token counts and amounts are integers (beyond
 * 2^53-1 a decimal string), an amount is {@code {"unit", "amount"}}, a pricing is
 * {@code {"unit": "TOKENS"}} or a table of integer prices per million tokens. Every language
 * charges the same amount for the same call because they all call this one implementation.
 */
public final class Pricing {
    private Pricing() {}

    /**
     * One pure function by name: {@code text_tokens}, {@code prompt_texts}, {@code prompt_tokens},
     * {@code output_bound}, {@code lookup_price}, {@code cost}, {@code estimate},
     * {@code estimate_request}, {@code actual}, {@code settlement}, {@code lower_bound},
     * {@code tool_allowed}, {@code filter_tools}, {@code plan_caps}, {@code usage},
     * {@code stream_request}, {@code call_failed}, {@code observe}.
     *
     * @param name the function
     * @param argsJson its arguments as a JSON object
     * @return its result as JSON
     * @throws dev.cycles.errors.InvalidArgumentException for an unknown function or a bad argument
     */
    public static String call(String name, String argsJson) {
        return Native.pricingCall(name, argsJson);
    }
}
