package dev.cycles.spring.ai;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.cycles.CyclesClient;
import dev.cycles.LocalServer;
import dev.cycles.Pricing;
import dev.cycles.internal.Json;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.ai.anthropic.AnthropicChatModel;
import org.springframework.ai.anthropic.AnthropicChatOptions;
import org.springframework.ai.anthropic.api.AnthropicApi;
import org.springframework.ai.chat.client.ChatClient;
import org.springframework.retry.support.RetryTemplate;

/** The advisor over Spring AI's Anthropic model against the fake provider's Messages API. */
class CyclesChatAdvisorAnthropicTest {
    private static final String MODEL = "claude-3-5-sonnet-20241022";
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

    @AfterEach
    void close() {
        client.close();
        server.close();
    }

    private static void fault(String json) throws Exception {
        FakeProvider.admin("POST", "/_fake/faults", json);
    }

    private ChatClient chat() throws Exception {
        FakeProvider.admin("POST", "/_fake/reset", null);
        server = LocalServer.builder().budget("tenant:acme", "TOKENS", 1_000_000).start();
        client = CyclesClient.builder().baseUrl(server.url()).apiKey(server.apiKey()).tenant(server.tenant())
                .defaultUnit("TOKENS").journalEnabled(false).build();
        AnthropicChatModel model = AnthropicChatModel.builder()
                .anthropicApi(AnthropicApi.builder().baseUrl(FakeProvider.url()).apiKey("k").build())
                .retryTemplate(RetryTemplate.builder().maxAttempts(1).build()).build();
        return ChatClient.builder(model).defaultOptions(AnthropicChatOptions.builder().model(MODEL).maxTokens(64).build())
                .defaultAdvisors(CyclesChatAdvisor.builder(client).build()).build();
    }

    private List<String> ledger() {
        List<String> out = new ArrayList<>();
        for (Object o : (List<?>) Json.parse(server.ledgerJson())) {
            Map<?, ?> e = (Map<?, ?>) o;
            out.add(e.get("kind") + ":" + e.get("amount"));
        }
        return out;
    }

    private static long estimate(String text) {
        String args = "{\"pricing\":{\"unit\":\"TOKENS\"},\"model\":\"" + MODEL + "\",\"request\":{\"model\":\"" + MODEL + "\","
                + "\"messages\":[{\"role\":\"user\",\"content\":" + Json.write(text) + "}],\"max_tokens\":64}}";
        Map<?, ?> out = (Map<?, ?>) Json.parse(Pricing.call("estimate_request", args));
        return ((Number) ((Map<?, ?>) out.get("amount")).get("amount")).longValue();
    }

    @Test
    void callAndStreamCommitTheUsage() throws Exception {
        ChatClient chat = chat();
        assertEquals("The answer is forty two", chat.prompt().user("What is the answer?").call().content());
        String streamed = String.join("", chat.prompt().user("What is the answer?").stream().content().collectList().block());
        assertEquals("The answer is forty two", streamed.trim());
        long e = estimate("What is the answer?");
        assertEquals(List.of("reserve:" + e, "commit:9", "reserve:" + e, "commit:9"), ledger());
    }

    @Test
    void brokenStreamCommitsTheInputTokensSeen() throws Exception {
        ChatClient chat = chat();
        // message_start (input tokens 4) arrives, the stream breaks before message_delta.
        fault("{\"endpoint\":\"messages\",\"fault\":{\"kind\":\"cut_stream\",\"after_chunks\":3}}");
        assertThrows(RuntimeException.class, () -> chat.prompt().user("What is the answer?").stream().content().collectList().block());
        assertEquals(List.of("reserve:" + estimate("What is the answer?"), "commit:4"), ledger());
    }
}
