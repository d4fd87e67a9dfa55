module example.com/order-timeout

go 1.19

require github.com/delayq/delayq/clients/go v0.0.0

replace github.com/delayq/delayq/clients/go => ../../clients/go
