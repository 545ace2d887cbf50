package secret

// kafkaVectors are values Kafka 3.9.1's EncryptingPasswordEncoder wrote
// (interop/testdata/passwordencoder/PasswordEncoderCheck.java, ENCODE
// lines, with kafka-server-common 3.9.1 and kafka-clients on the
// classpath; Kafka 4 no longer ships the encoder). The first is Kafka's
// defaults; its clear value has a character outside the BMP, which Java
// counts twice in passwordLength.
var kafkaVectors = []struct{ name, secret, clear, encoded string }{
	{"defaults", "verbatim-test-secret", "pässword\U0001D11E",
		"initializationVector:5QjH2cTeYusv/5YbPWgQMw==,keyLength:128,salt:fz9PuaRVI5KKP2qTwr3lVP93BFRNPVQ/qfn0ijeajtTlRX7XM2RoFesNyBviUwAjhJh7lp4VmvDY2Aj0GoaiIeHMC8A8cqNDKfIRT0OihxPEcxybLtvFsf9sZYAG3/m1xt6ooBUN3qbEZtsoyQgedDSpFPX2do8tf5zHqymsLblw4E2qQzaVoDUZQtG2Xl5dwq31w8TkJbqwPCgwyZ8VBLYDmdg9OckCZYmi1iVVpi0tkwWfCdI6N4JY+qgncWKCTdpzZM7Lagh6djDUseZt6gYpmoUcbdtFEuS/68u33LQzDOexmujUoqrdi0f4Eeex7EcSu/qMFjGugC5Shxf0zg==,keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/CBC/PKCS5Padding,iterations:4096,passwordLength:10,encryptedPassword:mkWbB+dRUDSyT2UlwhrjTw=="},
	{"gcm-sha256-256", "verbatim-test-secret", "x",
		"initializationVector:FrTzKX2z5SN7mI6l,keyLength:256,salt:tBu4G4Wz+FoXYAFEVF13GFwJa+RJEd5cTiQi98PSnMvy4lWEH/g0pVGpALXhWShnsB2LW79M0t55rAv4UIBq5+6zNMFSowEnsrEHvm0lTBNi66rtyxUKKlcjGi6b1QFKx8+tkoxZcUkYAd9SvwC1RbaToOe0Yg7/sFv75W4o28bwYREgJ3LWghLtDuVyKfq/Ua5gfO+pBDnsPKoepW6JxPtj+5QkzEcWBQwE0hnlwI9oE0HN7slwnJ9dxCZU8V7ccMdVibykW6uFjUJdO98F4YX4gBbJatgjAtgo4dVZEx1huFeCaDjEVD1X2JCcObZdjVUwArwI8ssfGNmugz6W6w==,keyFactoryAlgorithm:PBKDF2WithHmacSHA256,cipherAlgorithm:AES/GCM/NoPadding,authenticationTagLength:128,iterations:2048,passwordLength:1,encryptedPassword:mguFrCBvf7sEsRKHVpImQv4="},
}
