package dev.cycles.spring.ai;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.cycles.Caps;
import dev.cycles.CyclesClient;
import dev.cycles.LocalServer;
import dev.cycles.Pricing;
import dev.cycles.errors.BudgetExceededException;
import dev.cycles.internal.Json;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.ai.chat.client.ChatClient;
import org.springframework.ai.chat.model.ChatResponse;
import org.springframework.ai.openai.OpenAiChatModel;
import org.springframework.ai.openai.OpenAiChatOptions;
import org.springframework.ai.openai.api.OpenAiApi;
import org.springframework.retry.support.RetryTemplate;

/**
 * The advisor with a real Spring AI ChatClient over Spring AI's OpenAI model, against the fake
 * provider (`cycles fake-provider`, its path in -Dcycles.cli) and the SDK's local Cycles
 * server: the ledger and the provider's request log asserted.
 */
class CyclesChatAdvisorTest {
    private LocalServer server;
    private CyclesClient client;

    @BeforeAll
    static void startProvider() throws Exception {
        FakeProvider.start();
    }

    @AfterAll
    static void stopProvider() {
        FakeProvider.stop();
    }

    @BeforeEach
    void reset() throws Exception {
        admin("POST", "/_fake/reset", null);
    }

    @AfterEach
    void close() {
        if (client != null) {
            client.close();
        }
        if (server != null) {
            server.close();
        }
    }

    private static String admin(String method, String path, String body) throws Exception {
        return FakeProvider.admin(method, path, body);
    }

    private static List<Map<String, Object>> providerRequests() throws Exception {
        return FakeProvider.requests();
    }

    private List<String> ledger() {
        List<String> out = new ArrayList<>();
        for (Object o : (List<?>) Json.parse(server.ledgerJson())) {
            Map<?, ?> e = (Map<?, ?>) o;
            out.add(e.get("kind") + ":" + e.get("amount"));
        }
        return out;
    }

    private ChatClient chat(LocalServer s) {
        server = s;
        client = CyclesClient.builder().baseUrl(s.url()).apiKey(s.apiKey()).tenant(s.tenant()).defaultUnit("TOKENS")
                .journalEnabled(false).build();
        OpenAiChatModel model = OpenAiChatModel.builder()
                .openAiApi(OpenAiApi.builder().baseUrl(FakeProvider.url()).apiKey("k").build())
                .retryTemplate(RetryTemplate.builder().maxAttempts(1).build()).build();
        return ChatClient.builder(model)
                .defaultOptions(OpenAiChatOptions.builder().model("gpt-4o-mini").maxTokens(64).streamUsage(true).build())
                .defaultAdvisors(CyclesChatAdvisor.builder(client).build()).build();
    }

    private static LocalServer tokens(long allocated) {
        return LocalServer.builder().budget("tenant:acme", "TOKENS", allocated).start();
    }

    /** The core's estimate of the one-message prompt with a bound of 64, in TOKENS. */
    private static long estimate(String text, int bound) {
        String args = "{\"pricing\":{\"unit\":\"TOKENS\"},\"model\":\"gpt-4o-mini\",\"request\":{\"model\":\"gpt-4o-mini\","
                + "\"messages\":[{\"role\":\"user\",\"content\":" + Json.write(text) + "}],\"max_tokens\":" + bound + "}}";
        Map<?, ?> out = (Map<?, ?>) Json.parse(Pricing.call("estimate_request", args));
        return ((Number) ((Map<?, ?>) out.get("amount")).get("amount")).longValue();
    }

    @Test
    void callReservesTheEstimateAndCommitsTheUsage() throws Exception {
        ChatClient chat = chat(tokens(1_000_000));
        ChatResponse r = chat.prompt().user("What is the answer?").call().chatResponse();
        assertEquals("The answer is forty two", r.getResult().getOutput().getText());
        long used = r.getMetadata().getUsage().getPromptTokens() + r.getMetadata().getUsage().getCompletionTokens();
        assertEquals(4 + 5, used);
        assertEquals(List.of("reserve:" + estimate("What is the answer?", 64), "commit:" + used), ledger());
        assertEquals(64L, ((Number) providerRequests().get(0).get("output_bound")).longValue());
    }

    @Test
    void streamCommitsTheFinalUsage() throws Exception {
        ChatClient chat = chat(tokens(1_000_000));
        List<String> parts = chat.prompt().user("What is the answer?").stream().content().collectList().block();
        assertEquals("The answer is forty two", String.join("", parts).trim());
        assertEquals(List.of("reserve:" + estimate("What is the answer?", 64), "commit:9"), ledger());
        assertEquals(Boolean.TRUE, providerRequests().get(0).get("stream"));
    }

    @Test
    void deniedBeforeTheModelIsCalled() throws Exception {
        ChatClient chat = chat(tokens(10));
        assertThrows(BudgetExceededException.class, () -> chat.prompt().user("What is the answer?").call().content());
        assertEquals(List.of(), ledger());
        assertEquals(List.of(), providerRequests());
    }

    @Test
    void capsLowerTheOutputBound() throws Exception {
        ChatClient chat = chat(LocalServer.builder()
                .budget("tenant:acme", "TOKENS", 1_000_000, new Caps(3L, null, null, null, null)).start());
        String text = chat.prompt().user("What is the answer?").call().content();
        assertEquals("The answer is", text);
        assertEquals(3L, ((Number) providerRequests().get(0).get("output_bound")).longValue());
        assertThat(ledger()).containsExactly("reserve:" + estimate("What is the answer?", 64), "commit:7");
    }

    @Test
    void providerFailureReleases() throws Exception {
        ChatClient chat = chat(tokens(1_000_000));
        admin("POST", "/_fake/faults", "{\"endpoint\":\"chat_completions\",\"fault\":{\"kind\":\"server_error\"}}");
        assertThrows(RuntimeException.class, () -> chat.prompt().user("What is the answer?").call().content());
        long e = estimate("What is the answer?", 64);
        assertEquals(List.of("reserve:" + e, "release:" + e), ledger());
    }

    @Test
    void brokenStreamWithoutUsageReleasesAndFails() throws Exception {
        ChatClient chat = chat(tokens(1_000_000));
        admin("POST", "/_fake/faults", "{\"endpoint\":\"chat_completions\",\"fault\":{\"kind\":\"cut_stream\",\"after_chunks\":2}}");
        assertThrows(RuntimeException.class,
                () -> chat.prompt().user("What is the answer?").stream().content().collectList().block());
        long e = estimate("What is the answer?", 64);
        // Chat Completions streams carry the usage in their last chunk only: none was seen.
        assertEquals(List.of("reserve:" + e, "release:" + e), ledger());
    }
}
