package dev.cycles;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.cycles.errors.InvalidArgumentException;
import dev.cycles.internal.Json;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * Every case of conformance/vectors/pricing.json through {@link Pricing}: results compared
 * exactly, errors by kind and message; a function the file lacks, or one this test does not
 * know, fails.
 */
class PricingVectorsTest {
    static final List<String> FUNCTIONS = List.of("text_tokens", "prompt_texts", "prompt_tokens", "output_bound", "lookup_price", "cost",
            "estimate", "estimate_request", "actual", "settlement", "lower_bound", "tool_allowed", "filter_tools",
            "plan_caps", "usage", "stream_request", "call_failed", "observe");

    /** Objects with sorted keys, so results compare by value whatever the member order. */
    static Object canonical(Object v) {
        if (v instanceof Map<?, ?> map) {
            TreeMap<String, Object> out = new TreeMap<>();
            map.forEach((k, x) -> out.put((String) k, canonical(x)));
            return out;
        }
        if (v instanceof List<?> list) {
            return list.stream().map(PricingVectorsTest::canonical).toList();
        }
        return v;
    }

    @Test
    void everyPricingVector() throws Exception {
        Map<String, Object> doc = VectorsTest.doc("pricing.json");
        assertEquals("cycles-pricing-vectors", doc.get("format"));
        Map<String, Object> functions = VectorsTest.m(doc.get("functions"));
        assertEquals(new TreeSet<>(FUNCTIONS), new TreeSet<>(functions.keySet()), "the vectors' functions");
        int ran = 0;
        for (String fn : FUNCTIONS) {
            List<Object> cases = VectorsTest.l(functions.get(fn));
            assertTrue(!cases.isEmpty(), fn + " has no cases");
            for (Object o : cases) {
                Map<String, Object> c = VectorsTest.m(o);
                String name = fn + " " + VectorsTest.name(c);
                String args = Json.write(c.get("input"));
                if (c.containsKey("expect")) {
                    assertEquals(canonical(c.get("expect")), canonical(Json.parse(Pricing.call(fn, args))), name);
                } else {
                    Map<String, Object> err = VectorsTest.m(c.get("error"));
                    assertEquals("INVALID_ARGUMENT", err.get("kind"), name);
                    InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> Pricing.call(fn, args), name);
                    String part = (String) err.get("message_contains");
                    assertTrue(e.getMessage().contains(part), name + ": " + e.getMessage());
                }
                ran++;
            }
        }
        assertTrue(ran >= 166, "only " + ran + " pricing vectors ran");
    }
}
