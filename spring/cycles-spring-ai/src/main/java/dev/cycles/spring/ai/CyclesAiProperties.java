package dev.cycles.spring.ai;

import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * {@code cycles.ai.*}: the auto-configured {@link CyclesChatAdvisor} (docs/spring.md,
 * "Spring AI").
 */
@ConfigurationProperties(prefix = "cycles.ai")
public class CyclesAiProperties {
    /** Whether to auto-configure the CyclesChatAdvisor bean (with a CyclesClient bean and Spring AI present). */
    private boolean enabled = true;

    /** Whether every ChatClient built from Spring AI's auto-configured ChatClient.Builder gets the advisor (a ChatClientCustomizer). */
    private boolean adviseChatClients = true;

    /** The core's pricing as JSON: {"unit":"TOKENS"} (the default) or a price table (docs/integrations.md). */
    private String pricing;

    /** The action kind of each model call (the action name is the model); default llm.completion. */
    private String actionKind;

    /** The output bound of a request whose options set no max tokens (without it such a call fails: nothing to reserve). */
    private Long defaultOutputBound;

    /** The advisor's order among the ChatClient's advisors. */
    private int order;

    public boolean isEnabled() {
        return enabled;
    }

    public void setEnabled(boolean enabled) {
        this.enabled = enabled;
    }

    public boolean isAdviseChatClients() {
        return adviseChatClients;
    }

    public void setAdviseChatClients(boolean adviseChatClients) {
        this.adviseChatClients = adviseChatClients;
    }

    public String getPricing() {
        return pricing;
    }

    public void setPricing(String pricing) {
        this.pricing = pricing;
    }

    public String getActionKind() {
        return actionKind;
    }

    public void setActionKind(String actionKind) {
        this.actionKind = actionKind;
    }

    public Long getDefaultOutputBound() {
        return defaultOutputBound;
    }

    public void setDefaultOutputBound(Long defaultOutputBound) {
        this.defaultOutputBound = defaultOutputBound;
    }

    public int getOrder() {
        return order;
    }

    public void setOrder(int order) {
        this.order = order;
    }
}
